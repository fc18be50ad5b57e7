// Package bootloader is the second-stage bootloader of a simulated board:
// at every start it reads otadata, picks the slot to boot, checks its
// image, and decides whether it runs on trial; it rolls back a trial that
// ended before the image confirmed itself. Process mode (cmd/holo-board)
// then runs the slot's executable; fleet mode re-initialises a board from
// the chosen slot's description.
//
// The decision, by the boot slot's state in otadata:
//
//	state            what the bootloader does
//	(no record)      first start: install the running firmware into ota_0,
//	                 confirmed
//	new              check the image; record pending verify; boot on trial
//	pending verify   the trial ended before confirmation (exit, crash,
//	                 kill, power cut): record the slot aborted (rolled
//	                 back) and boot the other slot, when it is confirmed
//	                 and checks out; otherwise try the trial once more
//	valid            check the image and boot it
//	invalid/aborted  boot the other slot when it is confirmed
//
// An image that fails its check is recorded invalid and the other slot is
// booted when it is confirmed. Every step is one otadata write, so a power
// cut between two steps leaves a record the next start continues from.
package bootloader

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/image"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

// RunDir is where extracted executables live, under the flash directory.
const RunDir = "run"

// Errors of booting.
var (
	// ErrNoBootable means neither slot holds an image that can boot.
	ErrNoBootable = errors.New("bootloader: no bootable image")
	// ErrInstall means the first-start installation failed.
	ErrInstall = errors.New("bootloader: installing the first image failed")
)

// Config is what the bootloader needs.
type Config struct {
	Flash  *flash.Flash
	Expect image.Expect
	// Install returns the image to write into ota_0 when otadata holds no
	// record (a board's first start).
	Install func() ([]byte, error)
	Log     *slog.Logger
}

// Choice is the outcome of one start.
type Choice struct {
	Slot  int
	Label string
	Image *image.Image
	// Trial is true when the image runs on trial and must confirm itself.
	Trial bool
	// RolledBack names the slot whose trial was abandoned at this start.
	RolledBack string
	// Installed is true when this start installed the first image.
	Installed bool
}

// Choose makes the boot decision and records it in otadata.
func Choose(cfg Config) (Choice, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	odp, err := cfg.Flash.Open(flash.OTAData)
	if err != nil {
		return Choice{}, err
	}
	defer odp.Close()
	store := otadata.NewStore(odp)
	var c Choice
	rec, err := store.Read()
	if errors.Is(err, otadata.ErrEmpty) {
		if rec, err = install(cfg, store); err != nil {
			return c, err
		}
		c.Installed = true
	} else if err != nil {
		return c, err
	}
	for range 4 { // each pass moves to a later record; two slots need at most three
		b := rec.Boot()
		o := rec.Other()
		var next otadata.Record
		switch rec.States[b] {
		case otadata.New, otadata.Valid:
			im, verr := check(cfg, b)
			if verr == nil {
				if rec.States[b] == otadata.New {
					if rec, err = store.Update(func(cur otadata.Record, _ error) (otadata.Record, error) {
						return cur.With(b, otadata.PendingVerify)
					}); err != nil {
						return c, err
					}
					c.Trial = true
				}
				c.Slot, c.Label, c.Image = b, flash.Slots[b], im
				return c, nil
			}
			cfg.Log.Error("bootloader: image fails its check", "slot", flash.Slots[b], "err", verr)
			next, err = rec.With(b, otadata.Invalid)
			if err == nil && rec.States[o] == otadata.Valid {
				next, err = next.Select(o, otadata.Valid)
			}
			if err == nil && rec.States[o] != otadata.Valid {
				if _, err = store.Update(func(otadata.Record, error) (otadata.Record, error) { return next, nil }); err != nil {
					return c, err
				}
				return c, fmt.Errorf("%w: %s: %v", ErrNoBootable, flash.Slots[b], verr)
			}
		case otadata.PendingVerify:
			if rec.States[o] != otadata.Valid {
				cfg.Log.Warn("bootloader: trial ended unconfirmed, but there is nothing to roll back to; trying again", "slot", flash.Slots[b])
				im, verr := check(cfg, b)
				if verr != nil {
					return c, fmt.Errorf("%w: %s: %v", ErrNoBootable, flash.Slots[b], verr)
				}
				c.Slot, c.Label, c.Image, c.Trial = b, flash.Slots[b], im, true
				return c, nil
			}
			cfg.Log.Warn("bootloader: trial ended before the image confirmed itself; rolling back", "slot", flash.Slots[b], "to", flash.Slots[o])
			c.RolledBack = flash.Slots[b]
			next, err = rec.With(b, otadata.Aborted)
			if err == nil {
				next, err = next.Select(o, otadata.Valid)
			}
		default: // invalid, aborted or undefined boot slot
			if rec.States[o] != otadata.Valid {
				return c, fmt.Errorf("%w: %s is %s and %s is %s", ErrNoBootable, flash.Slots[b], rec.States[b], flash.Slots[o], rec.States[o])
			}
			next, err = rec.Select(o, otadata.Valid)
		}
		if err != nil {
			return c, err
		}
		if rec, err = store.Update(func(otadata.Record, error) (otadata.Record, error) { return next, nil }); err != nil {
			return c, err
		}
	}
	return c, fmt.Errorf("%w: no decision after several passes", ErrNoBootable)
}

func check(cfg Config, slot int) (*image.Image, error) {
	p, err := cfg.Flash.Open(flash.Slots[slot])
	if err != nil {
		return nil, err
	}
	defer p.Close()
	exp := cfg.Expect
	exp.Force = true // the project was checked when the image came in
	return image.VerifyAt(p, p.Size(), exp)
}

// install writes the first image into ota_0 and records it confirmed.
func install(cfg Config, store *otadata.Store) (otadata.Record, error) {
	if cfg.Install == nil {
		return otadata.Record{}, fmt.Errorf("%w: otadata is empty and there is nothing to install", ErrInstall)
	}
	img, err := cfg.Install()
	if err != nil {
		return otadata.Record{}, fmt.Errorf("%w: %v", ErrInstall, err)
	}
	p, err := cfg.Flash.Open(flash.Slots[0])
	if err != nil {
		return otadata.Record{}, err
	}
	defer p.Close()
	if _, err := p.WriteAt(img, 0); err != nil {
		return otadata.Record{}, fmt.Errorf("%w: %v", ErrInstall, err)
	}
	if err := p.Sync(); err != nil {
		return otadata.Record{}, fmt.Errorf("%w: %v", ErrInstall, err)
	}
	if _, err := image.VerifyAt(p, p.Size(), image.Expect{Chip: cfg.Expect.Chip, ChipRev: cfg.Expect.ChipRev, Force: true}); err != nil {
		return otadata.Record{}, fmt.Errorf("%w: %v", ErrInstall, err)
	}
	cfg.Log.Info("bootloader: first start; installed the running firmware", "slot", flash.Slots[0])
	return store.Update(func(_ otadata.Record, _ error) (otadata.Record, error) {
		empty := otadata.Record{States: [2]otadata.State{otadata.Undefined, otadata.Undefined}}
		return empty.Select(0, otadata.Valid)
	})
}

// Confirm records that the image in slot is up: a slot on trial becomes
// valid. It does nothing when slot is not on trial.
func Confirm(fl *flash.Flash, slot int) (confirmed bool, err error) {
	odp, err := fl.Open(flash.OTAData)
	if err != nil {
		return false, err
	}
	defer odp.Close()
	errSkip := errors.New("not on trial")
	_, err = otadata.NewStore(odp).Update(func(cur otadata.Record, rerr error) (otadata.Record, error) {
		if rerr != nil || cur.Boot() != slot || cur.States[slot] != otadata.PendingVerify {
			return cur, errSkip
		}
		return cur.With(slot, otadata.Valid)
	})
	if errors.Is(err, errSkip) {
		return false, nil
	}
	return err == nil, err
}

// Extract writes the executable of the chosen image to
// <flash>/run/<label>-<sha256 prefix> (once; a file already there with
// the right content is kept) and returns its path.
func Extract(fl *flash.Flash, c Choice) (string, error) {
	if len(c.Image.Segments) <= image.PayloadIndex {
		return "", fmt.Errorf("%w: %s has no executable segment", ErrNoBootable, c.Label)
	}
	dir := filepath.Join(fl.Dir(), RunDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.Label+"-"+c.Image.SHA256Hex()[:16])
	p, err := fl.Open(c.Label)
	if err != nil {
		return "", err
	}
	defer p.Close()
	seg := c.Image.Segment(p, image.PayloadIndex)
	if ok, _ := sameContent(path, seg); ok {
		return path, nil
	}
	// Remove older executables of this slot.
	if old, _ := filepath.Glob(filepath.Join(dir, c.Label+"-*")); len(old) > 0 {
		for _, o := range old {
			_ = os.Remove(o)
		}
	}
	tmp, err := os.CreateTemp(dir, ".extract-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, io.NewSectionReader(seg, 0, seg.Size())); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

func sameContent(path string, seg *io.SectionReader) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != seg.Size() {
		return false, err
	}
	h1, h2 := sha256.New(), sha256.New()
	if _, err := io.Copy(h1, f); err != nil {
		return false, err
	}
	if _, err := io.Copy(h2, io.NewSectionReader(seg, 0, seg.Size())); err != nil {
		return false, err
	}
	return hex.EncodeToString(h1.Sum(nil)) == hex.EncodeToString(h2.Sum(nil)), nil
}
