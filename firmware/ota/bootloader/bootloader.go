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
//
// # Secure boot
//
// With keys burned in the board's eFuses (Config.Fuses, package efuse),
// an image's check includes its signature: it must carry a block of a
// trusted, unrevoked key that verifies (image.Trust.Check), as ESP-IDF's
// bootloader checks an application under Secure Boot V2. A slot that fails
// is recorded invalid like any image that fails its check, and the other
// slot boots when it is confirmed and passes: a rollback, never a brick.
// Two exceptions keep a board bootable:
//   - The factory firmware runs as is: the image the first start
//     installs from the executable the board was started with
//     (Config.Factory, its SHA-256) needs no signature.
//   - When neither slot may boot, the factory firmware is installed again
//     into ota_0 and boots (the owner who started the board chose it).
//
// When the boot slot is confirmed, the bootloader also applies the
// revocations its image asks for (ApplyRevocations), so a power cut
// between the firmware confirming itself and revoking only delays them.
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

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
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
	// InstallTo, when set, is used instead of Install: it writes that
	// image to w, so that a large one (an executable of tens of
	// megabytes) never has to be held in memory.
	InstallTo func(w io.Writer) error
	Log       *slog.Logger
	// Fuses are the board's eFuses; nil is a board with none (open).
	Fuses *efuse.Fuses
	// Factory is the SHA-256 of the factory image, the one Install
	// returns (made from the executable the board was started with): that
	// image boots without a signature. Zero: no factory image.
	Factory [32]byte
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
	// Installed is true when this start installed the first image (or
	// installed the factory firmware again, nothing else being bootable).
	Installed bool
	// SecureBoot is true when keys are burned: the image was checked
	// against them.
	SecureBoot bool
	// Signers are the keys whose blocks verify over the image, trusted or
	// not (image.Signers).
	Signers []image.KeyDigest
	// Factory is true when the image boots as the factory firmware, with
	// no block of a trusted key.
	Factory bool
	// Revoked lists the keys this start revoked for the confirmed image.
	Revoked []image.KeyDigest
}

// trust reads the fuses; an open board (no Fuses) trusts nothing and
// checks nothing.
func (cfg Config) trust() (image.Trust, error) {
	if cfg.Fuses == nil {
		return image.Trust{}, nil
	}
	st, err := cfg.Fuses.Read()
	if err != nil {
		return image.Trust{}, err
	}
	return st.Trust(), nil
}

// Choose makes the boot decision and records it in otadata.
func Choose(cfg Config) (Choice, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Flash.DropStaged()
	trust, err := cfg.trust()
	if err != nil {
		return Choice{}, err
	}
	c, err := choose(cfg, trust)
	if errors.Is(err, ErrNoBootable) && trust.Enabled() && (cfg.Install != nil || cfg.InstallTo != nil) {
		cfg.Log.Error("bootloader: no slot holds an image this board may boot; installing the factory firmware again", "err", err)
		if err := reinstall(cfg); err != nil {
			return c, err
		}
		if c, err = choose(cfg, trust); err == nil {
			c.Installed = true
		}
	}
	if err != nil {
		return c, err
	}
	c.SecureBoot = trust.Enabled()
	return c, nil
}

// choose is Choose with the trust read.
func choose(cfg Config, trust image.Trust) (Choice, error) {
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
			im, verr := check(cfg, trust, b, &c)
			if verr == nil {
				if rec.States[b] == otadata.New {
					if rec, err = store.Update(func(cur otadata.Record, _ error) (otadata.Record, error) {
						return cur.With(b, otadata.PendingVerify)
					}); err != nil {
						return c, err
					}
					c.Trial = true
				} else {
					// Confirmed: burn its secure version (again, should a
					// power cut have come between confirm and burn).
					if err := burnSecureVersion(cfg, im, c.Factory); err != nil {
						return c, err
					}
					if trust.Enabled() && len(im.Desc.Revoke) > 0 {
						if c.Revoked, err = applyRevocations(cfg, store, b, im); err != nil {
							return c, err
						}
					}
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
				im, verr := check(cfg, trust, b, &c)
				if verr != nil {
					cfg.Log.Error("bootloader: image fails its check", "slot", flash.Slots[b], "err", verr)
					if _, err := store.Update(func(cur otadata.Record, _ error) (otadata.Record, error) {
						return cur.With(b, otadata.Invalid)
					}); err != nil {
						return c, err
					}
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

// check verifies the image in slot: its structure, then, with keys
// burned, its signature (or that it is the factory firmware). It fills
// c's Signers and Factory.
func check(cfg Config, trust image.Trust, slot int, c *Choice) (*image.Image, error) {
	im, signers, factory, err := Check(cfg.Flash, slot, cfg.Expect, trust, cfg.Factory)
	if err != nil {
		return nil, err
	}
	c.Signers, c.Factory = signers, factory
	return im, nil
}

// Check verifies the image in slot of fl as the bootloader does before
// booting it (the update service does the same before activating): its
// structure (any project: that was checked when it came in), then, when
// trust has keys, a block of a trusted, unrevoked key, unless the image
// is the factory image (its SHA-256 is factory). It returns the image,
// every key whose block verifies (trusted or not), and whether it passed
// as the factory firmware.
func Check(fl *flash.Flash, slot int, exp image.Expect, trust image.Trust, factory [32]byte) (*image.Image, []image.KeyDigest, bool, error) {
	p, err := fl.Open(flash.Slots[slot])
	if err != nil {
		return nil, nil, false, err
	}
	defer p.Close()
	exp.Force = true
	im, err := image.VerifyAt(p, p.Size(), exp)
	if err != nil {
		return nil, nil, false, err
	}
	signers := image.Signers(im)
	isFactory := factory != ([32]byte{}) && im.SHA256 == factory
	// Anti-rollback: an image below the board's secure version is
	// refused, keys or not. The factory firmware (the executable the
	// board's owner started) is exempt, as from signatures.
	if err := trust.CheckSecureVersion(im.Desc); err != nil && !isFactory {
		return nil, nil, false, err
	}
	if !trust.Enabled() {
		return im, signers, false, nil
	}
	_, terr := trust.Check(im)
	if terr == nil {
		return im, signers, false, nil
	}
	if isFactory {
		return im, signers, true, nil
	}
	return nil, nil, false, terr
}

// install writes the first image into ota_0 and records it confirmed.
func install(cfg Config, store *otadata.Store) (otadata.Record, error) {
	if err := writeFactory(cfg); err != nil {
		return otadata.Record{}, err
	}
	cfg.Log.Info("bootloader: first start; installed the running firmware", "slot", flash.Slots[0])
	return store.Update(func(_ otadata.Record, _ error) (otadata.Record, error) {
		empty := otadata.Record{States: [2]otadata.State{otadata.Undefined, otadata.Undefined}}
		return empty.Select(0, otadata.Valid)
	})
}

// reinstall writes the factory image into ota_0 again and boots it
// confirmed; ota_1 keeps its state unless it was selected.
func reinstall(cfg Config) error {
	if err := writeFactory(cfg); err != nil {
		return err
	}
	odp, err := cfg.Flash.Open(flash.OTAData)
	if err != nil {
		return err
	}
	defer odp.Close()
	_, err = otadata.NewStore(odp).Update(func(cur otadata.Record, rerr error) (otadata.Record, error) {
		if rerr != nil {
			cur = otadata.Record{States: [2]otadata.State{otadata.Undefined, otadata.Undefined}}
		}
		return cur.Select(0, otadata.Valid)
	})
	return err
}

// writeFactory writes Install's (or InstallTo's) image into ota_0
// (staged, then committed in one rename) and checks its structure.
func writeFactory(cfg Config) error {
	if cfg.Install == nil && cfg.InstallTo == nil {
		return fmt.Errorf("%w: otadata is empty and there is nothing to install", ErrInstall)
	}
	exp := image.Expect{Chip: cfg.Expect.Chip, ChipRev: cfg.Expect.ChipRev, Force: true}
	var img []byte
	if cfg.InstallTo == nil {
		var err error
		if img, err = cfg.Install(); err != nil {
			return fmt.Errorf("%w: %v", ErrInstall, err)
		}
		if _, err := image.VerifyBytes(img, exp); err != nil {
			return fmt.Errorf("%w: %v", ErrInstall, err)
		}
	}
	st, err := cfg.Flash.Stage(flash.Slots[0])
	if err != nil {
		return err
	}
	if img != nil {
		_, err = st.WriteAt(img, 0)
	} else {
		w := &countingWriter{w: io.NewOffsetWriter(st, 0)}
		if err = cfg.InstallTo(w); err == nil {
			_, err = image.VerifyAt(io.NewSectionReader(st, 0, w.n), w.n, exp)
		}
	}
	if err != nil {
		st.Abort()
		return fmt.Errorf("%w: %v", ErrInstall, err)
	}
	if err := st.Commit(); err != nil {
		return fmt.Errorf("%w: %v", ErrInstall, err)
	}
	if err := cfg.Flash.Durable(flash.Slots[0]); err != nil {
		return fmt.Errorf("%w: %v", ErrInstall, err)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
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

// ApplyRevocations applies what the confirmed image in slot asks to
// revoke (image.Desc.Revoke, under efuse.Revocable's rule), after
// checking the image against the fuses. When it revokes a key, the other
// slot, if it holds a confirmed image that no longer passes, is recorded
// invalid: rolling back to it would be refused anyway. It returns the
// keys revoked now. The firmware calls it once it has confirmed itself;
// Choose calls it at every start that boots a confirmed image.
func ApplyRevocations(cfg Config, slot int) ([]image.KeyDigest, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	trust, err := cfg.trust()
	if err != nil || cfg.Fuses == nil {
		return nil, err
	}
	var c Choice
	im, err := check(cfg, trust, slot, &c)
	if err != nil {
		if !trust.Enabled() {
			return nil, nil // as before anti-rollback: an open board did not check here
		}
		return nil, err
	}
	if err := burnSecureVersion(cfg, im, c.Factory); err != nil {
		return nil, err
	}
	if !trust.Enabled() || len(im.Desc.Revoke) == 0 {
		return nil, nil
	}
	odp, err := cfg.Flash.Open(flash.OTAData)
	if err != nil {
		return nil, err
	}
	defer odp.Close()
	return applyRevocations(cfg, otadata.NewStore(odp), slot, im)
}

// burnSecureVersion raises the board's secure version to that of im, a
// confirmed image (not the factory firmware, which is exempt from it).
func burnSecureVersion(cfg Config, im *image.Image, factory bool) error {
	if cfg.Fuses == nil || factory || im.Desc.SecureVersion == 0 {
		return nil
	}
	before, err := cfg.Fuses.Read()
	if err != nil {
		return err
	}
	st, err := cfg.Fuses.BurnSecureVersion(im.Desc.SecureVersion)
	if err != nil {
		return err
	}
	if st.SecureVersion > before.SecureVersion {
		cfg.Log.Warn("bootloader: secure version raised by the confirmed image; older images are refused now", "secure_version", st.SecureVersion, "version", im.Desc.Version)
	}
	return nil
}

func applyRevocations(cfg Config, store *otadata.Store, slot int, im *image.Image) ([]image.KeyDigest, error) {
	trust, err := cfg.trust()
	if err != nil {
		return nil, err
	}
	signers, err := trust.Check(im)
	if err != nil {
		return nil, nil // the factory image: no trusted signer, no say
	}
	st, done, err := cfg.Fuses.Revoke(signers, im.Desc.Revoke)
	if err != nil || len(done) == 0 {
		return nil, err
	}
	for _, k := range done {
		cfg.Log.Warn("bootloader: key revoked at the request of the confirmed image", "key", k.String(), "slot", flash.Slots[slot], "version", im.Desc.Version)
	}
	other := 1 - slot
	rec, err := store.Read()
	if err != nil || rec.States[other] != otadata.Valid {
		return done, nil
	}
	var c Choice
	if _, verr := check(cfg, st.Trust(), other, &c); verr != nil {
		cfg.Log.Warn("bootloader: the previous image no longer passes; recording it invalid", "slot", flash.Slots[other], "err", verr)
		_, err = store.Update(func(cur otadata.Record, _ error) (otadata.Record, error) {
			return cur.With(other, otadata.Invalid)
		})
	}
	return done, err
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
