package flash

import (
	"bytes"
	"errors"
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
