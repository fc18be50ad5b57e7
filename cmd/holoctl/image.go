package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/holofleet/holofleet/firmware/buildinfo"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/firmware/ota/image"
)

// runImage is holoctl image pack|inspect: build and pack firmware images,
// and look inside them.
func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "usage: holoctl image pack --version V [--exe FILE] [-o FILE]")
		fmt.Fprintln(stderr, "       holoctl image inspect FILE")
	}
	if len(args) == 0 {
		usage()
		return fmt.Errorf("%w: pack or inspect", errUsage)
	}
	switch args[0] {
	case "pack":
		return imagePack(ctx, args[1:], stdout, stderr)
	case "inspect":
		return imageInspect(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage()
		return flag.ErrHelp
	}
	usage()
	return fmt.Errorf("%w: unknown image command %q", errUsage, args[0])
}

const buildinfoPkg = "github.com/holofleet/holofleet/firmware/buildinfo"

func imagePack(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image pack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "firmware version written into the image and the build (required; at most 31 bytes)")
	exe := fs.String("exe", "", "pack this executable instead of building cmd/holo-board")
	out := fs.String("o", "", "output file (default holo-board-VERSION.bin)")
	project := fs.String("project", buildinfo.Project, "project name written into the image")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *version == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: --version is required and no arguments are taken", errUsage)
	}
	if *out == "" {
		*out = "holo-board-" + *version + ".bin"
	}
	now := time.Now().UTC()
	date, clock := now.Format("Jan _2 2006"), now.Format("15:04:05")
	path := *exe
	if path == "" {
		dir, err := os.MkdirTemp("", "holoctl-pack-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "holo-board")
		ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X '%s.Date=%s' -X %s.Time=%s", buildinfoPkg, *version, buildinfoPkg, date, buildinfoPkg, clock)
		cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags, "-o", path, "./cmd/holo-board")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building holo-board (run from the repository): %w", err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	img, err := image.Pack(image.Desc{Project: *project, Version: *version, Date: date, Time: clock, IDF: "host-" + goVersion()}, b)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, img, 0o644); err != nil {
		return err
	}
	im, err := image.VerifyBytes(img, image.Expect{Chip: image.ChipHost, Force: true})
	if err != nil {
		return fmt.Errorf("the packed image does not verify: %w", err)
	}
	fmt.Fprintf(stdout, "%s: %s %s, %d bytes, sha256 %s\n", *out, *project, *version, len(img), im.SHA256Hex())
	return nil
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil || len(out) < 2 {
		return "go"
	}
	return string(out[:len(out)-1])
}

func imageInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", buildinfo.Project, "project the image must be for (empty: any)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: one image file", errUsage)
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	e, segs, rerr := image.Read(f, st.Size())
	if rerr != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), rerr)
	}
	h, d := e.Header, e.Desc
	fmt.Fprintf(stdout, "file        %s (%d bytes)\n", fs.Arg(0), st.Size())
	fmt.Fprintf(stdout, "chip        0x%04x%s, revisions %d-%d\n", h.ChipID, chipName(h.ChipID), h.MinChipRevFull, h.MaxChipRevFull)
	fmt.Fprintf(stdout, "entry       0x%08x\n", h.Entry)
	for i, s := range segs {
		fmt.Fprintf(stdout, "segment %-3d load 0x%08x  offset %-9d %d bytes\n", i, s.LoadAddr, s.Offset, s.Len)
	}
	fmt.Fprintf(stdout, "project     %s\nversion     %s\nbuilt       %s %s\nidf         %s\nelf sha256  %s\nsecure ver  %d\n",
		d.Project, d.Version, d.Date, d.Time, d.IDF, d.ELFSHA256Hex(), d.SecureVersion)
	exp := ota.HostExpect()
	exp.Chip = h.ChipID
	exp.Project = *project
	exp.Force = *project == ""
	im, err := image.Verify(f, st.Size(), exp)
	if err != nil {
		fmt.Fprintf(stdout, "verify      FAILED: %v\n", err)
		return err
	}
	fmt.Fprintf(stdout, "checksum    0x%02x ok\nhash        %x ok\nsha256      %s\nverify      ok\n", im.Checksum, im.Appended, im.SHA256Hex())
	return nil
}

func chipName(id uint16) string {
	if id == image.ChipHost {
		return " (host build)"
	}
	return ""
}
