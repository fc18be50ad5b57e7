package flash

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

func TestPartitions(t *testing.T) {
	fl, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	od, err := fl.Open(OTAData)
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	b := make([]byte, OTADataSize)
	if _, err := od.ReadAt(b, 0); err != nil || !bytes.Equal(b, bytes.Repeat([]byte{0xFF}, OTADataSize)) {
		t.Fatalf("fresh otadata is not erased: %v", err)
	}
	s, err := fl.Open("ota_1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != SlotSize || s.Address() != FirstSlot+SlotSize || s.Label() != "ota_1" {
		t.Fatalf("%s %d %#x", s.Label(), s.Size(), s.Address())
	}
	if _, err := s.WriteAt([]byte{1}, SlotSize); !errors.Is(err, ErrRange) {
		t.Fatalf("write past the end: %v", err)
	}
	if err := s.Erase(10, 4); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	_, _ = s.ReadAt(got, 9)
	if !bytes.Equal(got, []byte{0, 0xFF, 0xFF, 0xFF, 0xFF, 0}) {
		t.Fatalf("erase: % x", got)
	}
	if _, err := fl.Open("nvs"); !errors.Is(err, ErrNoPartition) {
		t.Fatalf("unknown label: %v", err)
	}
	unlock, err := od.Lock()
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}

// TestStage: the slot keeps its bytes until Commit, and after Abort.
func TestStage(t *testing.T) {
	fl, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	read := func() []byte {
		p, err := fl.Open("ota_1")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		b := make([]byte, 8)
		if _, err := p.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}
	p, _ := fl.Open("ota_1")
	_, _ = p.WriteAt([]byte("old slot"), 0)
	p.Close()
	st, err := fl.Stage("ota_1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt([]byte{1}, SlotSize); !errors.Is(err, ErrRange) {
		t.Fatalf("past the end: %v", err)
	}
	if got := read(); string(got) != "old slot" {
		t.Fatalf("slot changed before commit: %q", got)
	}
	st.Abort()
	if got := read(); string(got) != "old slot" {
		t.Fatalf("slot changed by abort: %q", got)
	}
	st, _ = fl.Stage("ota_1")
	_, _ = st.WriteAt([]byte("new"), 0)
	if err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read(); !bytes.Equal(got, []byte("new\x00\x00\x00\x00\x00")) {
		t.Fatalf("after commit: %q", got)
	}
	p, _ = fl.Open("ota_1")
	defer p.Close()
	if fi, _ := p.f.Stat(); fi.Size() != SlotSize {
		t.Fatalf("committed slot of %d bytes", fi.Size())
	}
	// A cut leaves a staged file; DropStaged clears it.
	st, _ = fl.Stage("ota_0")
	_, _ = st.WriteAt([]byte("x"), 0)
	fl.DropStaged()
	if m, _ := filepath.Glob(filepath.Join(fl.Dir(), "*"+StageSuffix)); len(m) != 0 {
		t.Fatalf("left: %v", m)
	}
	if _, err := fl.Stage(OTAData); !errors.Is(err, ErrNoPartition) {
		t.Fatalf("staging otadata: %v", err)
	}
}

// TestStageRecycles: a commit exchanges the files, so the next stage
// writes over the previous slot's file; what it does not write past its
// end reads as zeros for the 8 KiB a signature sector could take.
func TestStageRecycles(t *testing.T) {
	fl, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stage := func(b []byte) {
		st, err := fl.Stage("ota_0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	stage(bytes.Repeat([]byte{0xE7}, 20000))
	stage(bytes.Repeat([]byte{0xA1}, 10000)) // onto a fresh staging file
	stage([]byte("short"))                   // onto the first image's file
	p, err := fl.Open("ota_0")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := make([]byte, 20000)
	if _, err := p.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("short"), make([]byte, tailClear)...)
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("after the image: % x", got[5:40])
	}
	if !bytes.Equal(got[len(want):], bytes.Repeat([]byte{0xE7}, 20000-len(want))) {
		t.Fatal("expected the recycled file's old bytes past the cleared tail")
	}
	if err := fl.Durable("ota_0"); err != nil {
		t.Fatal(err)
	}
}
