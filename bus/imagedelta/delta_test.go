package imagedelta_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/holofleet/holofleet/bus/imagedelta"
)

// pair returns a base of n pseudo-random bytes and a target that differs
// from it in a few places, with some bytes inserted.
func pair(n int) (base, target []byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	base = make([]byte, n)
	for i := range base {
		base[i] = byte(rng.IntN(256))
	}
	target = bytes.Clone(base[:n/2])
	target = append(target, []byte("a new function in the middle")...)
	target = append(target, base[n/2:]...)
	for i := 0; i < 20; i++ {
		target[rng.IntN(len(target))] ^= 0x5a
	}
	return base, target
}

func TestApply(t *testing.T) {
	base, target := pair(256 << 10)
	delta, err := imagedelta.Make(base, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(delta) > len(target)/20 {
		t.Errorf("delta of %d bytes for a %d-byte image with a few changes", len(delta), len(target))
	}
	h, err := imagedelta.ParseHeader(delta)
	if err != nil {
		t.Fatal(err)
	}
	if h.Base != sha256.Sum256(base) || h.Target != sha256.Sum256(target) || h.Size != int64(len(target)) {
		t.Fatalf("header %+v", h)
	}
	flip := func(at int) []byte { d := bytes.Clone(delta); d[at] ^= 1; return d }
	longer := binary.LittleEndian.AppendUint32(bytes.Clone(delta[:72]), uint32(len(target)+1))
	shorter := binary.LittleEndian.AppendUint32(bytes.Clone(delta[:72]), uint32(len(target)-1))
	tests := []struct {
		name  string
		base  []byte
		delta []byte
		want  error
	}{
		{"good", base, delta, nil},
		{"wrong base", target, delta, imagedelta.ErrBase},
		{"bad magic", base, flip(0), imagedelta.ErrFormat},
		{"short", base, delta[:40], imagedelta.ErrFormat},
		{"flipped frame byte", base, flip(len(delta) / 2), imagedelta.ErrCorrupt},
		{"flipped checksum", base, flip(len(delta) - 1), imagedelta.ErrCorrupt},
		{"target hash", base, flip(50), imagedelta.ErrCorrupt},
		{"truncated frame", base, delta[:len(delta)-10], imagedelta.ErrCorrupt},
		{"trailing garbage", base, append(bytes.Clone(delta), 1, 2, 3), imagedelta.ErrCorrupt},
		{"header claims more", base, append(longer, delta[76:]...), imagedelta.ErrCorrupt},
		{"header claims less", base, append(shorter, delta[76:]...), imagedelta.ErrCorrupt},
		{"zero size", base, append(binary.LittleEndian.AppendUint32(bytes.Clone(delta[:72]), 0), delta[76:]...), imagedelta.ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imagedelta.Apply(tt.base, tt.delta)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if err == nil && !bytes.Equal(got, target) {
				t.Fatal("rebuilt image differs from the target")
			}
		})
	}
}

func TestMakeFromNothing(t *testing.T) {
	_, target := pair(4096)
	delta, err := imagedelta.Make(nil, target)
	if err != nil {
		t.Fatal(err)
	}
	got, err := imagedelta.Apply(nil, delta)
	if err != nil || !bytes.Equal(got, target) {
		t.Fatalf("err %v", err)
	}
	if _, err := imagedelta.Make(nil, nil); !errors.Is(err, imagedelta.ErrFormat) {
		t.Fatalf("empty target: %v", err)
	}
}

func FuzzParseHeader(f *testing.F) {
	base, target := pair(4096)
	d, _ := imagedelta.Make(base, target)
	f.Add(d[:imagedelta.HeaderSize])
	f.Add([]byte("HOLODLT1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := imagedelta.ParseHeader(b)
		if err != nil {
			return
		}
		if got := h.Append(nil); !bytes.Equal(got, b[:imagedelta.HeaderSize]) {
			t.Fatalf("header does not round-trip")
		}
	})
}

// FuzzApply feeds arbitrary deltas against a fixed base: never a panic,
// and an answer only when it is the image the header promises.
func FuzzApply(f *testing.F) {
	base, target := pair(8192)
	d, _ := imagedelta.Make(base, target)
	f.Add(d)
	f.Add(d[:len(d)-1])
	f.Fuzz(func(t *testing.T, delta []byte) {
		got, err := imagedelta.Apply(base, delta)
		if err != nil {
			return
		}
		h, _ := imagedelta.ParseHeader(delta)
		if sha256.Sum256(got) != h.Target || int64(len(got)) != h.Size {
			t.Fatalf("accepted an image that is not the target")
		}
	})
}
