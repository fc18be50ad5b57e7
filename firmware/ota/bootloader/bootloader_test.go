package bootloader

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

var exp = image.Expect{Chip: image.ChipHost, Project: "holo-board"}

func img(t *testing.T, version string) []byte {
	b, err := image.Pack(image.Desc{Project: "holo-board", Version: version}, []byte("#!/bin/sh\necho "+version+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func setup(t *testing.T) (*flash.Flash, *otadata.Store) {
	fl, err := flash.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Choose(Config{Flash: fl, Expect: exp, Install: func() ([]byte, error) { return img(t, "1.0.0"), nil }})
	if err != nil || !c.Installed || c.Slot != 0 || c.Trial || c.Image.Desc.Version != "1.0.0" {
		t.Fatalf("install: %+v %v", c, err)
	}
	p, _ := fl.Open(flash.OTAData)
	t.Cleanup(func() { p.Close() })
	return fl, otadata.NewStore(p)
}

func write(t *testing.T, fl *flash.Flash, slot int, b []byte) {
	p, _ := fl.Open(flash.Slots[slot])
	defer p.Close()
	if _, err := p.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

func set(t *testing.T, st *otadata.Store, f func(otadata.Record) (otadata.Record, error)) {
	if _, err := st.Update(func(cur otadata.Record, _ error) (otadata.Record, error) { return f(cur) }); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyWithoutInstall(t *testing.T) {
	fl, _ := flash.Open(t.TempDir())
	if _, err := Choose(Config{Flash: fl, Expect: exp}); !errors.Is(err, ErrInstall) {
		t.Fatal(err)
	}
}

func TestNewBecomesTrialThenConfirmed(t *testing.T) {
	fl, st := setup(t)
	write(t, fl, 1, img(t, "2.0.0"))
	set(t, st, func(r otadata.Record) (otadata.Record, error) { return r.Select(1, otadata.New) })
	c, err := Choose(Config{Flash: fl, Expect: exp})
	if err != nil || c.Slot != 1 || !c.Trial {
		t.Fatalf("%+v %v", c, err)
	}
	if ok, err := Confirm(fl, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _ := Confirm(fl, 1); ok {
		t.Fatal("confirmed twice")
	}
	c, _ = Choose(Config{Flash: fl, Expect: exp})
	if c.Slot != 1 || c.Trial {
		t.Fatalf("%+v", c)
	}
	path, err := Extract(fl, c)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Extract(fl, c)
	b, _ := os.ReadFile(path)
	if again != path || string(b[:9]) != "#!/bin/sh" {
		t.Fatalf("%s %s %q", path, again, b)
	}
}

func TestCorruptImageFallsBack(t *testing.T) {
	fl, st := setup(t)
	bad := img(t, "2.0.0")
	bad[300] ^= 1
	write(t, fl, 1, bad)
	set(t, st, func(r otadata.Record) (otadata.Record, error) { return r.Select(1, otadata.New) })
	c, err := Choose(Config{Flash: fl, Expect: exp})
	if err != nil || c.Slot != 0 || c.Trial {
		t.Fatalf("%+v %v", c, err)
	}
	r, _ := st.Read()
	if r.States[1] != otadata.Invalid || r.Boot() != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestPendingWithoutFallbackRetries(t *testing.T) {
	fl, st := setup(t)
	write(t, fl, 1, img(t, "2.0.0"))
	set(t, st, func(r otadata.Record) (otadata.Record, error) {
		r.States[0] = otadata.Invalid
		return r.Select(1, otadata.PendingVerify)
	})
	c, err := Choose(Config{Flash: fl, Expect: exp})
	if err != nil || c.Slot != 1 || !c.Trial {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestNothingBootable(t *testing.T) {
	fl, st := setup(t)
	write(t, fl, 0, []byte("erased"))
	if _, err := Choose(Config{Flash: fl, Expect: exp}); !errors.Is(err, ErrNoBootable) {
		t.Fatalf("%v", err)
	}
	if r, _ := st.Read(); r.States[0] != otadata.Invalid {
		t.Fatalf("%+v", r)
	}
}

// TestInstallTo: the streaming install writes the same first image as
// Install, and one that fails its check is refused as Install's would be.
func TestInstallTo(t *testing.T) {
	fl, err := flash.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := img(t, "1.0.0")
	c, err := Choose(Config{Flash: fl, Expect: exp, InstallTo: func(w io.Writer) error { _, err := w.Write(want); return err }})
	if err != nil || !c.Installed || c.Slot != 0 || c.Trial || c.Image.Desc.Version != "1.0.0" || c.Image.SHA256 != sha256.Sum256(want) {
		t.Fatalf("install: %+v %v", c, err)
	}
	if c, err := Choose(Config{Flash: fl, Expect: exp}); err != nil || c.Installed || c.Image.Desc.Version != "1.0.0" {
		t.Fatalf("next start: %+v %v", c, err)
	}

	fl, _ = flash.Open(t.TempDir())
	bad := bytes.Clone(want)
	bad[len(bad)-40] ^= 1 // the checksum byte's neighbourhood: a broken image
	if _, err := Choose(Config{Flash: fl, Expect: exp, InstallTo: func(w io.Writer) error { _, err := w.Write(bad); return err }}); !errors.Is(err, ErrInstall) {
		t.Fatalf("a bad first image: %v", err)
	}
	if _, err := Choose(Config{Flash: fl, Expect: exp}); !errors.Is(err, ErrInstall) {
		t.Fatalf("after a refused install, otadata must still be empty: %v", err)
	}
	fail := errors.New("disk full")
	if _, err := Choose(Config{Flash: fl, Expect: exp, InstallTo: func(io.Writer) error { return fail }}); !errors.Is(err, ErrInstall) {
		t.Fatalf("a failing writer: %v", err)
	}
}
