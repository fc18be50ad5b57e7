package main

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
)

// runImage is holoctl image pack|inspect|keygen|sign|verify: build, pack
// and sign firmware images, and look inside them.
func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "usage: holoctl image pack --version V [--exe FILE] [--revoke PUB]... [-o FILE]")
		fmt.Fprintln(stderr, "       holoctl image inspect FILE")
		fmt.Fprintln(stderr, "       holoctl image keygen -o KEY            (writes KEY, mode 0600, and KEY.pub)")
		fmt.Fprintln(stderr, "       holoctl image sign --key KEY [--revoke PUB]... IN [-o OUT]")
		fmt.Fprintln(stderr, "       holoctl image verify [--key PUB] FILE")
		fmt.Fprintln(stderr, "       holoctl image pubkey [--link] KEY     (the public key's digest, or its -ldflags form)")
		fmt.Fprintln(stderr, "       holoctl image delta OLD NEW -o PATCH   (a delta image: boards running OLD rebuild NEW from it)")
	}
	if len(args) == 0 {
		usage()
		return fmt.Errorf("%w: pack, inspect, keygen, sign, verify, pubkey or delta", errUsage)
	}
	switch args[0] {
	case "pack":
		return imagePack(ctx, args[1:], stdout, stderr)
	case "inspect":
		return imageInspect(args[1:], stdout, stderr)
	case "keygen":
		return imageKeygen(args[1:], stdout, stderr)
	case "sign":
		return imageSign(args[1:], stdout, stderr)
	case "verify":
		return imageVerify(args[1:], stdout, stderr)
	case "pubkey":
		return imagePubkey(args[1:], stdout, stderr)
	case "delta":
		return imageDelta(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage()
		return flag.ErrHelp
	}
	usage()
	return fmt.Errorf("%w: unknown image command %q", errUsage, args[0])
}

const buildinfoPkg = "github.com/holofleet/holofleet/bus/buildinfo"

func imagePack(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image pack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "firmware version written into the image and the build (required; at most 31 bytes)")
	exe := fs.String("exe", "", "pack this executable instead of building cmd/holo-board")
	out := fs.String("o", "", "output file (default holo-board-VERSION.bin)")
	project := fs.String("project", buildinfo.Project, "project name written into the image")
	var revoke keyList
	fs.Var(&revoke, "revoke", "public key `PEM` (or hex key digest) the image asks boards to revoke once it is confirmed; repeat for two")
	secver := fs.Uint("secure-version", 0, "anti-rollback secure version (0-255): once an image of this secure version confirms, a board refuses every image below it; raise it for security fixes only")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *version == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: --version is required and no arguments are taken", errUsage)
	}
	if *secver > efuse.MaxSecureVersion {
		return fmt.Errorf("%w: --secure-version %d: at most %d", errUsage, *secver, efuse.MaxSecureVersion)
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
	img, err := image.Pack(image.Desc{Project: *project, Version: *version, Date: date, Time: clock, IDF: "host-" + goVersion(), Revoke: revoke, SecureVersion: uint32(*secver)}, b)
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
	fmt.Fprintf(stdout, "checksum    0x%02x ok\nhash        %x ok\nsha256      %s\n", im.Checksum, im.Appended, im.SHA256Hex())
	for _, k := range im.Desc.Revoke {
		fmt.Fprintf(stdout, "revokes     %s\n", k)
	}
	printBlocks(stdout, im, image.Trust{})
	fmt.Fprintf(stdout, "verify      ok\n")
	return nil
}

// printBlocks lists the signature sector: every block, its key digest,
// whether its signature verifies and, with trust, whether its key is
// trusted.
func printBlocks(w io.Writer, im *image.Image, trust image.Trust) {
	if !im.Signed() {
		fmt.Fprintf(w, "signature   none (unsigned)\n")
		return
	}
	fmt.Fprintf(w, "signature   sector at %d, %d block(s), content sha256 %x\n", im.Content, len(im.Blocks), im.Digest)
	for _, c := range trust.CheckBlocks(im) {
		verdict := "signature ok"
		if !c.SignatureOK {
			verdict = "signature BAD"
			if c.Block.Err != nil {
				verdict = "block BAD: " + strings.TrimPrefix(c.Block.Err.Error(), "image: ")
			} else if c.Err != nil && errors.Is(c.Err, image.ErrBadSignature) {
				verdict = "signature BAD: " + strings.TrimPrefix(c.Err.Error(), "image: ")
			}
		}
		switch {
		case !trust.Enabled():
		case c.Revoked:
			verdict += ", key revoked"
		case c.Trusted:
			verdict += ", key trusted"
		default:
			verdict += ", key not given"
		}
		fmt.Fprintf(w, "block %-5d key %s  %s\n", c.Block.Index, c.Block.KeyDigest, verdict)
	}
	if im.SectorErr != nil {
		fmt.Fprintf(w, "sector      BAD: %s\n", strings.TrimPrefix(im.SectorErr.Error(), "image: "))
	}
}

// keyList is a repeatable flag of public keys, each a PEM file (public
// or private) or 64 hex digits.
type keyList []image.KeyDigest

func (l *keyList) String() string { return fmt.Sprint(len(*l), " keys") }

func (l *keyList) Set(v string) error {
	d, err := image.ParseKeyDigest(v)
	if err != nil {
		pub, perr := readPublicKey(v)
		if perr != nil {
			return perr
		}
		if d, err = image.DigestOf(pub); err != nil {
			return err
		}
	}
	if len(*l) == image.MaxRevoke {
		return fmt.Errorf("at most %d keys", image.MaxRevoke)
	}
	*l = append(*l, d)
	return nil
}

func readPublicKey(path string) (*ecdsa.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := image.ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// interleaved lets flags follow the positional argument (sign IN -o OUT):
// it parses, takes one positional, and parses the rest.
func interleaved(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", fmt.Errorf("%w: one image file", errUsage)
	}
	pos := fs.Arg(0)
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return "", err
	}
	if fs.NArg() != 0 {
		return "", fmt.Errorf("%w: one image file, not %q too", errUsage, fs.Arg(0))
	}
	return pos, nil
}

func imageKeygen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "private key file to write (PEM, mode 0600); the public key goes to FILE.pub")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 0 {
		return fmt.Errorf("%w: keygen -o KEY", errUsage)
	}
	k, err := image.GenerateKey()
	if err != nil {
		return err
	}
	priv, err := image.MarshalPrivateKey(k)
	if err != nil {
		return err
	}
	pub, err := image.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		return err
	}
	if err := writeNew(*out, priv, 0o600); err != nil {
		return err
	}
	if err := writeNew(*out+".pub", pub, 0o644); err != nil {
		_ = os.Remove(*out)
		return err
	}
	d, _ := image.DigestOf(&k.PublicKey)
	fmt.Fprintf(stdout, "%s: ECDSA P-256 signing key (keep it secret)\n%s.pub: its public key, digest %s\n", *out, *out, d)
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func imageSign(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyPath := fs.String("key", "", "private key PEM to sign with (required)")
	out := fs.String("o", "", "signed image to write (default: IN, rewritten)")
	var revoke keyList
	fs.Var(&revoke, "revoke", "public key `PEM` (or hex digest) the image asks boards to revoke; only on an image not signed yet")
	secver := fs.Int("secure-version", -1, "set the anti-rollback secure version (0-255); only on an image not signed yet (default: leave it)")
	in, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if *keyPath == "" {
		return fmt.Errorf("%w: --key KEY is required", errUsage)
	}
	kb, err := os.ReadFile(*keyPath)
	if err != nil {
		return err
	}
	key, err := image.ParsePrivateKey(kb)
	if err != nil {
		return fmt.Errorf("%s: %w", *keyPath, err)
	}
	img, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if len(revoke) > 0 {
		if img, err = image.WithRevoke(img, revoke); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
	}
	if *secver > efuse.MaxSecureVersion {
		return fmt.Errorf("%w: --secure-version %d: at most %d", errUsage, *secver, efuse.MaxSecureVersion)
	}
	if *secver >= 0 {
		if img, err = image.WithSecureVersion(img, uint32(*secver)); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
	}
	signed, err := image.Sign(img, key)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if *out == "" {
		*out = in
	}
	if err := writeReplace(*out, signed); err != nil {
		return err
	}
	im, err := image.Inspect(signed)
	if err != nil {
		return fmt.Errorf("the signed image does not verify: %w", err)
	}
	d, _ := image.DigestOf(&key.PublicKey)
	fmt.Fprintf(stdout, "%s: signed by %s (block %d of %d), %d bytes, sha256 %s\n", *out, d, len(im.Blocks)-1, len(im.Blocks), len(signed), im.SHA256Hex())
	return nil
}

// writeReplace writes path through a temporary file and a rename.
func writeReplace(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".holoctl-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func imageVerify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyPath := fs.String("key", "", "public key PEM (or private key) whose block must verify")
	path, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	img, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	im, err := image.Inspect(img)
	if err != nil {
		fmt.Fprintf(stdout, "verify      FAILED: %v\n", err)
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(stdout, "image       %s %s, %d bytes, sha256 %s\n", im.Desc.Project, im.Desc.Version, im.Size, im.SHA256Hex())
	var trust image.Trust
	if *keyPath != "" {
		pub, err := readPublicKey(*keyPath)
		if err != nil {
			return err
		}
		d, err := image.DigestOf(pub)
		if err != nil {
			return err
		}
		trust.Keys = []image.KeyDigest{d}
	}
	printBlocks(stdout, im, trust)
	if trust.Enabled() {
		signers, err := trust.Check(im)
		if err != nil {
			fmt.Fprintf(stdout, "verify      FAILED: %s\n", strings.TrimPrefix(err.Error(), "image: "))
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(stdout, "verify      ok: key %s signed it\n", signers[0])
		return nil
	}
	signers := image.Signers(im)
	if len(signers) == 0 || im.SectorErr != nil {
		fmt.Fprintf(stdout, "verify      FAILED: no block verifies\n")
		return fmt.Errorf("%s: %w", path, image.ErrUnsigned)
	}
	fmt.Fprintf(stdout, "verify      ok: %d block(s) verify\n", len(signers))
	return nil
}

func imagePubkey(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image pubkey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	link := fs.Bool("link", false, "print the key as go build -ldflags takes it (efuse.BuiltinKeys) instead of its digest")
	path, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	pub, err := readPublicKey(path)
	if err != nil {
		return err
	}
	if *link {
		s, err := image.LinkKey(pub)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, s)
		return nil
	}
	d, err := image.DigestOf(pub)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, d)
	return nil
}

func chipName(id uint16) string {
	if id == image.ChipHost {
		return " (host build)"
	}
	return ""
}
