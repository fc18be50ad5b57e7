package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/imagedelta"
)

// imageDelta is holoctl image delta OLD NEW -o PATCH: the delta image
// (bus/imagedelta) that turns OLD into NEW on a board running OLD. Both
// must be images that check (NEW with its signature sector, which the
// delta carries: the board rebuilds the signed image byte for byte). The
// delta is applied once here before it is written, so a delta that does
// not rebuild NEW is never written.
func imageDelta(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl image delta", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the delta file to write (required)")
	// Flags may follow the files: holoctl image delta OLD NEW -o PATCH.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 2 || *out == "" {
		return fmt.Errorf("%w: holoctl image delta OLD NEW -o PATCH", errUsage)
	}
	var imgs [2][]byte
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if _, err := image.VerifyBytes(b, image.Expect{Chip: image.ChipHost, Force: true}); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		imgs[i] = b
	}
	delta, err := imagedelta.Make(imgs[0], imgs[1])
	if err != nil {
		return err
	}
	if _, err := imagedelta.Apply(imgs[0], delta); err != nil {
		return fmt.Errorf("the delta does not rebuild %s: %w", files[1], err)
	}
	if err := os.WriteFile(*out, delta, 0o644); err != nil {
		return err
	}
	h, _ := imagedelta.ParseHeader(delta)
	fmt.Fprintf(stdout, "%s: delta of %d bytes (%.1f%% of the %d-byte image) from %x to %x\n",
		*out, len(delta), 100*float64(len(delta))/float64(len(imgs[1])), len(imgs[1]), h.Base, h.Target)
	return nil
}
