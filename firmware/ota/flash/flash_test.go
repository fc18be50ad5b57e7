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
