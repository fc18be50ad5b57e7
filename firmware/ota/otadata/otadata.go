// Package otadata reads and writes the otadata partition: which
// application slot boots, and what is known about each slot.
//
// The partition is two 4 KiB sectors, each beginning with one 32-byte
// entry in the layout of ESP-IDF's esp_ota_select_entry_t (little-endian):
//
//	offset  size  field
//	     0     4  seq: the sequence number; the slot it boots is (seq-1) % 2
//	     4    20  seq_label; holofleet uses its first 4 bytes for the state
//	              of the slot that does not boot (an OTA state, as below),
//	              the other 16 bytes are 0xFF
//	    24     4  state of the boot slot: 0 new, 1 pending verify, 2 valid,
//	              3 invalid, 4 aborted, 0xFFFFFFFF undefined
//	    28     4  crc: CRC-32 (IEEE) of bytes 0-27
//
// An entry is valid when its seq is neither 0 nor 0xFFFFFFFF and its CRC
// matches; of two valid entries the higher seq wins, as in ESP-IDF and as
// in bbolt's two meta pages.
//
// Two departures from ESP-IDF, both so that a power cut at any moment
// leaves a good record:
//   - ESP-IDF's CRC covers seq only and a state change rewrites the entry in
//     place, so a cut during that write can lose the entry. Here the CRC
//     covers the whole entry, and every write, a state change included, goes
//     to the sector that does not hold the winning entry, with a higher seq.
//     Until the new entry is complete the old one wins; afterwards the new
//     one does.
//   - Because the losing entry is overwritten by every write, each entry
//     carries the states of both slots (the boot slot's in state, the
//     other's in the label). A state change keeps the boot slot by adding 2
//     to seq; choosing the other slot adds 1.
package otadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/holofleet/holofleet/firmware/hal"
)

// Layout of the partition.
const (
	EntrySize  = 32
	SectorSize = 4096
	Size       = 2 * SectorSize
	Slots      = 2
	labelLen   = 20
	erased     = 0xFFFFFFFF
)

// State is what is known about a slot, with ESP-IDF's esp_ota_img_states_t
// numbers.
type State uint32

// Slot states.
const (
	// New: selected to boot, not booted yet.
	New State = 0
	// PendingVerify: booted on trial, not confirmed.
	PendingVerify State = 1
	// Valid: confirmed by the image itself.
	Valid State = 2
	// Invalid: the image failed its check at boot or activation.
	Invalid State = 3
	// Aborted: the trial ended before the image confirmed itself; the
	// previous image was booted instead (rolled back).
	Aborted State = 4
	// Undefined: no record (an empty slot, or an image written but never
	// selected).
	Undefined State = erased
)

// String is the name GET /ota shows (null for Undefined is the caller's).
func (s State) String() string {
	switch s {
	case New, PendingVerify:
		return "trial"
	case Valid:
		return "confirmed"
	case Invalid:
		return "invalid"
	case Aborted:
		return "rolled_back"
	case Undefined:
		return "none"
	}
	return fmt.Sprintf("state(%d)", uint32(s))
}

func (s State) known() bool { return s <= Aborted || s == Undefined }

// Errors of otadata.
var (
	// ErrErased means an entry is erased flash (seq 0xFFFFFFFF or 0).
	ErrErased = errors.New("otadata: entry erased")
	// ErrCRC means an entry's CRC does not match: a torn or corrupt write.
	ErrCRC = errors.New("otadata: entry CRC mismatch")
	// ErrState means an entry holds a state number outside the enum.
	ErrState = errors.New("otadata: unknown state")
	// ErrEmpty means neither entry is valid: nothing selected yet.
	ErrEmpty = errors.New("otadata: no valid entry")
	// ErrSlot means a slot index out of range.
	ErrSlot = errors.New("otadata: no such slot")
	// ErrSeq means the sequence number would overflow.
	ErrSeq = errors.New("otadata: sequence exhausted")
)

// Record is the decoded content of the winning entry.
type Record struct {
	Seq uint32
	// States holds each slot's state, indexed by slot.
	States [Slots]State
}

// Boot is the slot the record boots.
func (r Record) Boot() int { return int((r.Seq - 1) % Slots) }

// Other is the slot that does not boot.
func (r Record) Other() int { return 1 - r.Boot() }

// Encode returns the 32-byte entry of r.
func (r Record) Encode() [EntrySize]byte {
	var b [EntrySize]byte
	binary.LittleEndian.PutUint32(b[0:], r.Seq)
	for i := 4; i < 4+labelLen; i++ {
		b[i] = 0xFF
	}
	binary.LittleEndian.PutUint32(b[4:], uint32(r.States[r.Other()]))
	binary.LittleEndian.PutUint32(b[24:], uint32(r.States[r.Boot()]))
	binary.LittleEndian.PutUint32(b[28:], crc32.ChecksumIEEE(b[:28]))
	return b
}

// Decode reads one 32-byte entry.
func Decode(b []byte) (Record, error) {
	var r Record
	if len(b) < EntrySize {
		return r, fmt.Errorf("%w: %d bytes", ErrErased, len(b))
	}
	r.Seq = binary.LittleEndian.Uint32(b)
	if r.Seq == 0 || r.Seq == erased {
		return r, fmt.Errorf("%w: seq 0x%08x", ErrErased, r.Seq)
	}
	if got, want := binary.LittleEndian.Uint32(b[28:]), crc32.ChecksumIEEE(b[:28]); got != want {
		return r, fmt.Errorf("%w: 0x%08x, entry gives 0x%08x", ErrCRC, got, want)
	}
	boot, other := State(binary.LittleEndian.Uint32(b[24:])), State(binary.LittleEndian.Uint32(b[4:]))
	if !boot.known() || !other.known() {
		return r, fmt.Errorf("%w: %d / %d", ErrState, boot, other)
	}
	r.States[r.Boot()], r.States[r.Other()] = boot, other
	return r, nil
}

// Pick returns the winning record of the two sectors' entries and the
// index (0 or 1) of the sector holding it.
func Pick(a, b []byte) (Record, int, error) {
	ra, errA := Decode(a)
	rb, errB := Decode(b)
	switch {
	case errA == nil && errB == nil:
		if rb.Seq > ra.Seq {
			return rb, 1, nil
		}
		return ra, 0, nil
	case errA == nil:
		return ra, 0, nil
	case errB == nil:
		return rb, 1, nil
	}
	return Record{}, -1, fmt.Errorf("%w (%v; %v)", ErrEmpty, errA, errB)
}

// Select returns the record that boots slot with its state set to st,
// other states kept: the next seq after r's that names slot.
func (r Record) Select(slot int, st State) (Record, error) {
	if slot < 0 || slot >= Slots {
		return r, fmt.Errorf("%w: %d", ErrSlot, slot)
	}
	n := r
	n.Seq = r.Seq + 1
	if r.Seq == 0 { // nothing before: seq 1 boots slot 0
		n.Seq = 1
	}
	for n.Boot() != slot {
		n.Seq++
	}
	if n.Seq == 0 || n.Seq == erased || n.Seq < r.Seq {
		return r, ErrSeq
	}
	n.States[slot] = st
	return n, nil
}

// With returns the record with slot's state set to st, booting the same
// slot (seq + 2).
func (r Record) With(slot int, st State) (Record, error) {
	if slot < 0 || slot >= Slots {
		return r, fmt.Errorf("%w: %d", ErrSlot, slot)
	}
	n := r
	n.Seq = r.Seq + Slots
	if n.Seq < r.Seq || n.Seq == erased {
		return r, ErrSeq
	}
	n.States[slot] = st
	return n, nil
}

// Store reads and writes records on an otadata partition.
type Store struct {
	p hal.Partition
}

// NewStore returns a Store on the otadata partition p.
func NewStore(p hal.Partition) *Store { return &Store{p: p} }

type locker interface {
	Lock() (func(), error)
}

func (s *Store) read() (Record, int, error) {
	var a, b [EntrySize]byte
	if _, err := s.p.ReadAt(a[:], 0); err != nil {
		return Record{}, -1, fmt.Errorf("otadata: %w", err)
	}
	if _, err := s.p.ReadAt(b[:], SectorSize); err != nil {
		return Record{}, -1, fmt.Errorf("otadata: %w", err)
	}
	return Pick(a[:], b[:])
}

// Read returns the winning record, or ErrEmpty.
func (s *Store) Read() (Record, error) {
	unlock, err := s.lock()
	if err != nil {
		return Record{}, err
	}
	defer unlock()
	r, _, err := s.read()
	return r, err
}

func (s *Store) lock() (func(), error) {
	if l, ok := s.p.(locker); ok {
		return l.Lock()
	}
	return func() {}, nil
}

// Update reads the winning record (a zero Record and ErrEmpty passed to f
// when there is none), lets f make the next one, and writes it over the
// losing entry: erase the sector, write the entry, sync. A write cut short
// leaves the previous record winning. f returning an error, or a record
// whose seq is not higher, writes nothing.
func (s *Store) Update(f func(cur Record, err error) (Record, error)) (Record, error) {
	unlock, err := s.lock()
	if err != nil {
		return Record{}, err
	}
	defer unlock()
	cur, at, rerr := s.read()
	if rerr != nil && !errors.Is(rerr, ErrEmpty) {
		return cur, rerr
	}
	next, err := f(cur, rerr)
	if err != nil {
		return cur, err
	}
	if rerr == nil && next.Seq <= cur.Seq {
		return cur, fmt.Errorf("%w: seq %d after %d", ErrSeq, next.Seq, cur.Seq)
	}
	sector := int64(0)
	if at == 0 {
		sector = SectorSize
	}
	if err := s.p.Erase(sector, SectorSize); err != nil {
		return cur, fmt.Errorf("otadata: %w", err)
	}
	e := next.Encode()
	if _, err := s.p.WriteAt(e[:], sector); err != nil {
		return cur, fmt.Errorf("otadata: %w", err)
	}
	if err := s.p.Sync(); err != nil {
		return cur, fmt.Errorf("otadata: %w", err)
	}
	return next, nil
}
