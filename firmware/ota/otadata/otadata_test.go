package otadata

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEntryVectors(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		hex  string
	}{
		{"first install", Record{Seq: 1, States: [2]State{Valid, Undefined}},
			"01000000 ffffffff ffffffffffffffffffffffffffffffff 02000000 d4b8c3e5"},
		{"ota_1 new, ota_0 valid", Record{Seq: 2, States: [2]State{Valid, New}},
			"02000000 02000000 ffffffffffffffffffffffffffffffff 00000000 6d3b0f9c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.hex)
			got := tt.rec.Encode()
			// The CRC column is computed, check the rest byte for byte.
			if diff := cmp.Diff(got[:28], want[:28]); diff != "" {
				t.Fatalf("entry (-got +want):\n%s", diff)
			}
			back, err := Decode(got[:])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(back, tt.rec); diff != "" {
				t.Fatalf("decode (-got +want):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := Record{Seq: 3, States: [2]State{PendingVerify, Valid}}.Encode()
	flip := func(i int) []byte { b := good; b[i] ^= 1; return b[:] }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"erased", bytes.Repeat([]byte{0xFF}, 32), ErrErased},
		{"zero", make([]byte, 32), ErrErased},
		{"short", good[:31], ErrErased},
		{"seq flipped", flip(0), ErrCRC},
		{"label flipped", flip(4), ErrCRC},
		{"state flipped", flip(24), ErrCRC},
		{"crc flipped", flip(31), ErrCRC},
	}
	for _, tt := range tests {
		if _, err := Decode(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v want %v", tt.name, err, tt.want)
		}
	}
	bad := Record{Seq: 1, States: [2]State{9, Undefined}}.Encode()
	if _, err := Decode(bad[:]); !errors.Is(err, ErrState) {
		t.Errorf("state 9: %v", err)
	}
}

func TestPick(t *testing.T) {
	r1 := Record{Seq: 1, States: [2]State{Valid, Undefined}}.Encode()
	r2 := Record{Seq: 2, States: [2]State{Valid, New}}.Encode()
	ff := bytes.Repeat([]byte{0xFF}, 32)
	torn := r2
	torn[26] = 0xFF
	for _, tc := range []struct {
		name   string
		a, b   []byte
		seq    uint32
		sector int
	}{
		{"higher wins b", r1[:], r2[:], 2, 1},
		{"higher wins a", r2[:], r1[:], 2, 0},
		{"only a", r1[:], ff, 1, 0},
		{"only b", ff, r1[:], 1, 1},
		{"torn b loses", r1[:], torn[:], 1, 0},
	} {
		rec, at, err := Pick(tc.a, tc.b)
		if err != nil || rec.Seq != tc.seq || at != tc.sector {
			t.Errorf("%s: %+v %d %v", tc.name, rec, at, err)
		}
	}
	if _, _, err := Pick(ff, ff); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
}

func TestSelectWith(t *testing.T) {
	r := Record{}
	r, err := r.Select(0, Valid)
	if err != nil || r.Seq != 1 || r.Boot() != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	r.States[1] = Undefined
	n, _ := r.Select(1, New)
	if n.Seq != 2 || n.Boot() != 1 || n.States != [2]State{Valid, New} {
		t.Fatalf("select 1: %+v", n)
	}
	n2, _ := n.With(1, PendingVerify)
	if n2.Seq != 4 || n2.Boot() != 1 || n2.States != [2]State{Valid, PendingVerify} {
		t.Fatalf("with: %+v", n2)
	}
	back, _ := n2.Select(0, Valid)
	if back.Seq != 5 || back.Boot() != 0 {
		t.Fatalf("back: %+v", back)
	}
	if _, err := (Record{Seq: 0xFFFFFFFE}).With(0, Valid); !errors.Is(err, ErrSeq) {
		t.Errorf("overflow: %v", err)
	}
}

// memPart is an in-memory partition that can cut a write short after
// budget bytes, as a power cut would.
type memPart struct {
	b      []byte
	budget int // bytes still writable; <0 unlimited
}

var errCut = errors.New("power cut")

func (m *memPart) Label() string { return "otadata" }
func (m *memPart) Size() int64   { return int64(len(m.b)) }
func (m *memPart) Sync() error   { return nil }
func (m *memPart) ReadAt(p []byte, off int64) (int, error) {
	return copy(p, m.b[off:]), nil
}
func (m *memPart) WriteAt(p []byte, off int64) (int, error) {
	n := len(p)
	if m.budget >= 0 && n > m.budget {
		n = m.budget
	}
	copy(m.b[off:], p[:n])
	if m.budget >= 0 {
		m.budget -= n
		if n < len(p) {
			return n, errCut
		}
	}
	return n, nil
}
func (m *memPart) Erase(off, n int64) error {
	ff := bytes.Repeat([]byte{0xFF}, int(n))
	_, err := m.WriteAt(ff, off)
	return err
}

// TestPowerCut cuts every write of a sequence of updates after every
// possible number of bytes; after each cut the store reads either the
// record before the write or the one after it.
func TestPowerCut(t *testing.T) {
	steps := []func(Record) (Record, error){
		func(r Record) (Record, error) { return r.Select(0, Valid) },
		func(r Record) (Record, error) { return r.Select(1, New) },
		func(r Record) (Record, error) { return r.With(1, PendingVerify) },
		func(r Record) (Record, error) { return r.With(1, Valid) },
		func(r Record) (Record, error) {
			r.States[0] = Undefined
			return r.With(0, Undefined)
		},
	}
	base := &memPart{b: bytes.Repeat([]byte{0xFF}, Size), budget: -1}
	cuts := 0
	for i, step := range steps {
		before, berr := NewStore(base).Read()
		for cut := 0; cut < SectorSize+EntrySize; cut += 7 {
			m := &memPart{b: bytes.Clone(base.b), budget: cut}
			_, err := NewStore(m).Update(func(cur Record, _ error) (Record, error) { return step(cur) })
			m.budget = -1
			got, gerr := NewStore(m).Read()
			cuts++
			if err != nil {
				if gerr != nil && !(errors.Is(berr, ErrEmpty) && errors.Is(gerr, ErrEmpty)) {
					t.Fatalf("step %d cut %d: read %v", i, cut, gerr)
				}
				if got != before {
					want, _ := step(before)
					if got != want {
						t.Fatalf("step %d cut %d: got %+v, neither %+v nor %+v", i, cut, got, before, want)
					}
				}
			}
		}
		if _, err := NewStore(base).Update(func(cur Record, _ error) (Record, error) { return step(cur) }); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	final, err := NewStore(base).Read()
	if err != nil || final.Boot() != 1 || final.States != [2]State{Undefined, Valid} {
		t.Fatalf("final %+v %v", final, err)
	}
	t.Logf("%d cut writes checked", cuts)
}

func FuzzDecode(f *testing.F) {
	r := Record{Seq: 2, States: [2]State{Valid, New}}.Encode()
	f.Add(r[:], bytes.Repeat([]byte{0xFF}, 32))
	f.Add(make([]byte, 32), r[:])
	f.Add(r[:10], r[:])
	f.Fuzz(func(t *testing.T, a, b []byte) {
		rec, _, err := Pick(a, b)
		if err != nil {
			return
		}
		e := rec.Encode()
		back, err := Decode(e[:])
		if err != nil || back != rec {
			t.Fatalf("round trip %+v -> %+v %v", rec, back, err)
		}
	})
}
