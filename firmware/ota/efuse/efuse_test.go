package efuse

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/image"
)

var a, b, c = image.KeyDigest{0xAA}, image.KeyDigest{0xBB}, image.KeyDigest{0xCC}

func TestFileVector(t *testing.T) {
	s := State{Keys: []image.KeyDigest{a, b}}
	s.Revoked[0] = true
	got, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := "48424546" + "01" + "02" + "01" + "00" +
		"aa" + strings.Repeat("00", 31) + "bb" + strings.Repeat("00", 31) + strings.Repeat("00", 32)
	if h := hex.EncodeToString(got[:offCRC]); h != want {
		t.Fatalf("bytes 0-103:\n%s\nwant\n%s", h, want)
	}
	back, err := Decode(got[:])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(back, s); diff != "" {
		t.Fatalf("round trip (-got +want):\n%s", diff)
	}
	if tr := back.Trust(); !tr.Enabled() || tr.Trusted(a) || !tr.Trusted(b) || tr.Trusted(c) {
		t.Fatalf("trust %+v", tr)
	}
}

func TestDecodeErrors(t *testing.T) {
	good, _ := State{Keys: []image.KeyDigest{a}}.Encode()
	edit := func(f func(x []byte), crc bool) []byte {
		x := good
		f(x[:])
		if crc {
			binary.LittleEndian.PutUint32(x[offCRC:], crc32.ChecksumIEEE(x[:offCRC]))
		}
		return x[:]
	}
	for name, in := range map[string][]byte{
		"short":          good[:50],
		"magic":          edit(func(x []byte) { x[0] = 'X' }, true),
		"crc":            edit(func(x []byte) { x[9] ^= 1 }, false),
		"version":        edit(func(x []byte) { x[4] = 2 }, true),
		"four keys":      edit(func(x []byte) { x[5] = 4 }, true),
		"revoke unknown": edit(func(x []byte) { x[6] = 2 }, true),
		"stray key":      edit(func(x []byte) { x[offKeys+40] = 1 }, true),
	} {
		if _, err := Decode(in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestBurnOnce(t *testing.T) {
	f := Open(t.TempDir())
	if s, err := f.Read(); err != nil || s.Enabled() {
		t.Fatalf("fresh: %+v %v", s, err)
	}
	if s, err := f.Burn(nil); err != nil || s.Enabled() {
		t.Fatalf("no keys: %+v %v", s, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, FileName)); !os.IsNotExist(err) {
		t.Fatal("burning no keys wrote the file")
	}
	s, err := f.Burn([]image.KeyDigest{a, b})
	if err != nil || len(s.Keys) != 2 {
		t.Fatalf("burn: %+v %v", s, err)
	}
	if s, err := f.Burn([]image.KeyDigest{a, b}); err != nil || len(s.Keys) != 2 {
		t.Fatalf("again: %+v %v", s, err)
	}
	if s, err := f.Burn(nil); err != nil || len(s.Keys) != 2 {
		t.Fatalf("no keys later: %+v %v", s, err)
	}
	s, err = f.Burn([]image.KeyDigest{c})
	if !errors.Is(err, ErrBurned) || len(s.Keys) != 2 || s.Keys[0] != a {
		t.Fatalf("other keys: %+v %v", s, err)
	}
	if _, err := f.Burn([]image.KeyDigest{a, b, c, {1}}); !errors.Is(err, ErrTooMany) {
		t.Fatal(err)
	}
	if _, err := f.Burn([]image.KeyDigest{a, a}); !errors.Is(err, ErrTooMany) {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, FileName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if _, err := f.Burn([]image.KeyDigest{a}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("burn over corrupt: %v", err)
	}
}

func TestRevocable(t *testing.T) {
	three := State{Keys: []image.KeyDigest{a, b, c}}
	bRevoked := three
	bRevoked.Revoked[1] = true
	tests := []struct {
		name               string
		s                  State
		signers, requested []image.KeyDigest
		want               []int
	}{
		{"later revokes earlier", three, []image.KeyDigest{b}, []image.KeyDigest{a}, []int{0}},
		{"last revokes both", three, []image.KeyDigest{c}, []image.KeyDigest{a, b}, []int{0, 1}},
		{"earlier cannot revoke later", three, []image.KeyDigest{a}, []image.KeyDigest{b, c}, nil},
		{"middle revokes only earlier", three, []image.KeyDigest{b}, []image.KeyDigest{a, c}, []int{0}},
		{"not its own signer", three, []image.KeyDigest{a, c}, []image.KeyDigest{a, b}, []int{1}},
		{"unknown key ignored", three, []image.KeyDigest{c}, []image.KeyDigest{{7}}, nil},
		{"already revoked", bRevoked, []image.KeyDigest{c}, []image.KeyDigest{b}, nil},
		{"revoked signer has no say", bRevoked, []image.KeyDigest{b}, []image.KeyDigest{a}, nil},
		{"open board", State{}, []image.KeyDigest{a}, []image.KeyDigest{b}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(Revocable(tt.s, tt.signers, tt.requested), tt.want); diff != "" {
				t.Fatalf("(-got +want):\n%s", diff)
			}
		})
	}
}

func TestRevoke(t *testing.T) {
	f := Open(t.TempDir())
	if _, err := f.Burn([]image.KeyDigest{a, b}); err != nil {
		t.Fatal(err)
	}
	s, done, err := f.Revoke([]image.KeyDigest{b}, []image.KeyDigest{a})
	if err != nil || !s.Revoked[0] || s.Revoked[1] || len(done) != 1 || done[0] != a {
		t.Fatalf("%+v %v %v", s, done, err)
	}
	again, err := f.Read()
	if err != nil || !again.Revoked[0] || again.Trust().Trusted(a) || !again.Trust().Trusted(b) {
		t.Fatalf("reread %+v %v", again, err)
	}
	if _, done, err := f.Revoke([]image.KeyDigest{b}, []image.KeyDigest{a}); err != nil || done != nil {
		t.Fatalf("twice: %v %v", done, err)
	}
	// A revoked key is never trusted again, whatever is burned later.
	if s, err := f.Burn([]image.KeyDigest{a}); !errors.Is(err, ErrBurned) || !s.Revoked[0] {
		t.Fatalf("re-burn: %+v %v", s, err)
	}
}

// TestCutDuringWrite: a cut at each step of a write leaves the old
// fuses or the new ones, and the next write works.
func TestCutDuringWrite(t *testing.T) {
	type cut struct{}
	for _, step := range []string{"burn:written", "burn:synced", "burn:renamed", "revoke:written", "revoke:synced", "revoke:renamed"} {
		t.Run(step, func(t *testing.T) {
			f := Open(t.TempDir())
			op := strings.Split(step, ":")[0]
			if op == "revoke" {
				if _, err := f.Burn([]image.KeyDigest{a, b}); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := f.Read()
			f.Cut = func(s string) {
				if s == step {
					panic(cut{})
				}
			}
			func() {
				defer func() {
					if r := recover(); r != nil && r != (cut{}) {
						panic(r)
					}
				}()
				if op == "burn" {
					_, _ = f.Burn([]image.KeyDigest{a, b})
				} else {
					_, _, _ = f.Revoke([]image.KeyDigest{b}, []image.KeyDigest{a})
				}
			}()
			f.Cut = nil
			after, err := f.Read()
			if err != nil {
				t.Fatalf("after the cut: %v", err)
			}
			var want State
			if op == "burn" {
				want = State{Keys: []image.KeyDigest{a, b}}
			} else {
				want = before
				want.Revoked[0] = true
			}
			if !cmp.Equal(after, before) && !cmp.Equal(after, want) {
				t.Fatalf("after the cut: %+v, neither %+v nor %+v", after, before, want)
			}
			// Carry on as the next start would.
			if op == "burn" {
				_, _ = f.Burn([]image.KeyDigest{a, b})
			} else {
				_, _, _ = f.Revoke([]image.KeyDigest{b}, []image.KeyDigest{a})
			}
			if final, err := f.Read(); err != nil || !cmp.Equal(final, want) {
				t.Fatalf("next start: %+v %v", final, err)
			}
		})
	}
}

func TestBuiltin(t *testing.T) {
	k, err := image.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	line, _ := image.LinkKey(&k.PublicKey)
	d, _ := image.DigestOf(&k.PublicKey)
	defer func(old string) { BuiltinKeys = old }(BuiltinKeys)
	BuiltinKeys = ""
	if got, err := Builtin(); err != nil || got != nil {
		t.Fatalf("none: %v %v", got, err)
	}
	BuiltinKeys = line + "," + line
	if got, err := Builtin(); err != nil || len(got) != 2 || got[0] != d {
		t.Fatalf("two: %v %v", got, err)
	}
	BuiltinKeys = "not-base64!"
	if _, err := Builtin(); !errors.Is(err, ErrBuiltin) {
		t.Fatal(err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []State{{}, {Keys: []image.KeyDigest{a}}, {Keys: []image.KeyDigest{a, b, c}, Revoked: [MaxKeys]bool{true, false, true}}} {
		b, _ := s.Encode()
		f.Add(b[:])
	}
	f.Add([]byte("HBEF"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Decode(in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v", err)
			}
			return
		}
		out, err := s.Encode()
		if err != nil || string(out[:]) != string(in) {
			t.Fatalf("does not round-trip: %v", err)
		}
	})
}
