package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var hostExpect = Expect{Chip: ChipHost, Project: "holo-board", MaxSize: 1 << 20}

func testDesc() Desc {
	return Desc{Version: "1.2.3", Project: "holo-board", Time: "12:34:56", Date: "Jan  2 2026", IDF: "host-go1.26"}
}

func mustPack(t testing.TB, d Desc, exe []byte) []byte {
	t.Helper()
	b, err := Pack(d, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHeaderVector(t *testing.T) {
	got := HostHeader().Append(nil)
	got[1] = 2
	want := unhex(t, "e9 02 02 20 00000840 ee 000000 4f48 00 0000 ffff 00000000 01")
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("header (-got +want):\n%s", diff)
	}
	h, err := ParseHeader(want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h.Append(nil), want); diff != "" {
		t.Fatalf("round trip (-got +want):\n%s", diff)
	}
}

func TestPackLayout(t *testing.T) {
	exe := []byte("#!/bin/sh\n") // 10 bytes, padded to 12
	b := mustPack(t, testDesc(), exe)
	// 24 header + 8+256 desc + 8+12 payload = 308; checksum at 319; +32.
	if len(b) != 320+32 {
		t.Fatalf("size %d", len(b))
	}
	if diff := cmp.Diff(b[288:296], unhex(t, "00000840 0c000000")); diff != "" {
		t.Errorf("payload segment header (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(b[24:32+4], unhex(t, "200040 3f 00010000 3254cdab")); diff != "" {
		t.Errorf("desc segment header + magic (-got +want):\n%s", diff)
	}
	sum := sha256.Sum256(b[:320])
	if !bytes.Equal(b[320:], sum[:]) {
		t.Error("appended hash is not the SHA-256 of what precedes it")
	}
	var want byte = ChecksumSeed
	for _, c := range b[32:288] {
		want ^= c
	}
	for _, c := range exe {
		want ^= c
	}
	if b[319] != want {
		t.Errorf("checksum 0x%02x, want 0x%02x", b[319], want)
	}
	im, err := VerifyBytes(b, hostExpect)
	if err != nil {
		t.Fatal(err)
	}
	d := testDesc()
	d.ELFSHA256 = sha256.Sum256(exe)
	if diff := cmp.Diff(im.Desc, d); diff != "" {
		t.Errorf("desc (-got +want):\n%s", diff)
	}
	if im.SHA256 != sha256.Sum256(b) || im.Size != int64(len(b)) {
		t.Errorf("image sha/size: %x %d", im.SHA256, im.Size)
	}
	seg := make([]byte, 12)
	if _, err := im.Segment(bytes.NewReader(b), PayloadIndex).Read(seg); err != nil || !bytes.Equal(seg[:10], exe) {
		t.Errorf("payload %q %v", seg, err)
	}
}

func TestVerifyErrors(t *testing.T) {
	good := mustPack(t, testDesc(), bytes.Repeat([]byte{0x5a}, 1000))
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	other := testDesc()
	other.Project = "other"
	build := func(h Header, segs ...Raw) []byte {
		b, err := Build(h, segs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	desc, _ := testDesc().Append(nil)
	noHash := HostHeader()
	noHash.HashAppended = 0
	esp32 := HostHeader()
	esp32.ChipID = 0x0000
	newRev := HostHeader()
	newRev.MinChipRevFull = 100
	tests := []struct {
		name string
		img  []byte
		exp  Expect
		want error
	}{
		{"empty", nil, hostExpect, ErrTruncated},
		{"wrong magic", mod(func(b []byte) []byte { b[0] = 0xE8; return b }), hostExpect, ErrMagic},
		{"otadata file", bytes.Repeat([]byte{0xFF}, 4096), hostExpect, ErrMagic},
		{"zero segments", mod(func(b []byte) []byte { b[1] = 0; return b }), hostExpect, ErrSegments},
		{"17 segments", mod(func(b []byte) []byte { b[1] = 17; return b }), hostExpect, ErrSegments},
		{"esp32 chip", build(esp32, Raw{LoadDesc, desc}), hostExpect, ErrChip},
		{"newer chip revision", build(newRev, Raw{LoadDesc, desc}), hostExpect, ErrChip},
		{"other project", mustPack(t, other, []byte("x")), hostExpect, ErrProject},
		{"desc magic", mod(func(b []byte) []byte { b[32] ^= 1; return b }), hostExpect, ErrDesc},
		{"first segment too short", build(HostHeader(), Raw{LoadDesc, desc[:128]}, Raw{LoadPayload, make([]byte, 1000)}), hostExpect, ErrSegments},
		{"lying length", mod(func(b []byte) []byte { b[293] = 0x10; return b }), hostExpect, ErrTruncated},
		{"huge length", mod(func(b []byte) []byte { b[295] = 0x7F; return b }), hostExpect, ErrTooLarge},
		{"odd length", mod(func(b []byte) []byte { b[292]++; return b }), hostExpect, ErrSegments},
		{"flipped payload bit", mod(func(b []byte) []byte { b[400] ^= 0x10; return b }), hostExpect, ErrChecksum},
		{"change the checksum misses", mod(func(b []byte) []byte { b[400], b[401] = 1, 2; b[402], b[403] = 2, 1; return b }), hostExpect, ErrHash},
		{"hash mismatch", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), hostExpect, ErrHash},
		{"truncated hash", good[:len(good)-1], hostExpect, ErrTruncated},
		{"truncated body", good[:600], hostExpect, ErrTruncated},
		{"trailing", append(bytes.Clone(good), 0), hostExpect, ErrTrailing},
		{"no hash", build(noHash, Raw{LoadDesc, desc}), hostExpect, ErrNoHash},
		{"too large", good, Expect{Chip: ChipHost, Project: "holo-board", MaxSize: 1000}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := VerifyBytes(tt.img, tt.exp)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := VerifyBytes(mustPack(t, other, []byte("x")), Expect{Chip: ChipHost, Project: "holo-board", Force: true}); err != nil {
		t.Errorf("force: %v", err)
	}
}

// TestEarlyFailFast: a wrong image is refused within the first 288 bytes,
// and a bad magic within the first 24.
func TestEarlyFailFast(t *testing.T) {
	other := testDesc()
	other.Project = "other"
	b := mustPack(t, other, bytes.Repeat([]byte{1}, 4096))
	v := NewVerifier(hostExpect)
	for i := range EarlyCheckSize {
		_, err := v.Write(b[i : i+1])
		if i < EarlyCheckSize-1 && err != nil {
			t.Fatalf("error at byte %d: %v", i, err)
		}
		if i == EarlyCheckSize-1 && !errors.Is(err, ErrProject) {
			t.Fatalf("at 288: %v", err)
		}
	}
	v = NewVerifier(hostExpect)
	_, err := v.Write(append([]byte{0xE9, 0}, make([]byte, 22)...))
	if !errors.Is(err, ErrSegments) {
		t.Fatalf("header alone: %v", err)
	}
	if _, err2 := v.Write([]byte{1}); !errors.Is(err2, ErrSegments) {
		t.Fatalf("error not sticky: %v", err2)
	}
}

// TestVerifyChunking: the result does not depend on how bytes arrive.
func TestVerifyChunking(t *testing.T) {
	b := mustPack(t, testDesc(), bytes.Repeat([]byte("holo"), 777))
	want, err := VerifyBytes(b, hostExpect)
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, 3, 7, 16, 33, 288, 289, 4096} {
		v := NewVerifier(hostExpect)
		for i := 0; i < len(b); i += chunk {
			if _, err := v.Write(b[i:min(i+chunk, len(b))]); err != nil {
				t.Fatalf("chunk %d at %d: %v", chunk, i, err)
			}
		}
		got, err := v.Finish()
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Fatalf("chunk %d (-got +want):\n%s", chunk, diff)
		}
	}
}

func TestDescFieldTooLong(t *testing.T) {
	d := testDesc()
	d.Version = strings.Repeat("9", 32)
	if _, err := Pack(d, nil); !errors.Is(err, ErrField) {
		t.Fatalf("got %v", err)
	}
	d.Version = strings.Repeat("9", 31)
	if _, err := Pack(d, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	b := mustPack(t, testDesc(), []byte("payload!"))
	e, segs, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if e.Desc.Version != "1.2.3" || len(segs) != 2 || segs[1].Len != 8 || segs[1].Offset != 296 {
		t.Fatalf("%+v %+v", e.Desc, segs)
	}
}

func FuzzVerify(f *testing.F) {
	good := mustPack(f, testDesc(), []byte("fuzz me"))
	f.Add(good)
	f.Add(good[:EarlyCheckSize])
	f.Add(good[:30])
	bad := bytes.Clone(good)
	bad[292] = 0xFF
	f.Add(bad)
	key := fixedKey(f, 1)
	trust := Trust{Keys: []KeyDigest{digestOf(f, key)}}
	f.Add(mustSign(f, good, key))
	f.Fuzz(func(t *testing.T, b []byte) {
		exp := Expect{Chip: ChipHost, Project: "holo-board", MaxSize: 1 << 16, Force: len(b)%2 == 0}
		im, err := VerifyBytes(b, exp)
		_, _, rerr := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if rerr != nil {
			t.Fatalf("verified but Read fails: %v", rerr)
		}
		if signers, err := trust.Check(im); err == nil && (len(signers) != 1 || signers[0] != trust.Keys[0]) {
			t.Fatalf("trusted signers %v", signers)
		}
		_ = Signers(im)
		// A verified image re-packs to itself when it is a host layout.
		if len(im.Segments) == 2 && im.Segments[0].Len == DescSize && im.Header == withCount(HostHeader(), 2) {
			payload := b[im.Segments[1].Offset : im.Segments[1].Offset+int64(im.Segments[1].Len)]
			again, err := Pack(im.Desc, payload)
			if err != nil {
				return // a field holding a NUL after its terminator cannot round-trip
			}
			if _, err := VerifyBytes(again, exp); err != nil {
				t.Fatalf("repacked image does not verify: %v", err)
			}
		}
	})
}

func withCount(h Header, n byte) Header { h.SegmentCount = n; return h }

func TestVerifyAt(t *testing.T) {
	b := mustPack(t, testDesc(), bytes.Repeat([]byte("slot"), 5000))
	slot := append(bytes.Clone(b), bytes.Repeat([]byte{0xAB}, 9999)...) // old bytes after the image
	im, err := VerifyAt(bytes.NewReader(slot), int64(len(slot)), hostExpect)
	if err != nil || im.Size != int64(len(b)) {
		t.Fatalf("%v %+v", err, im)
	}
	if _, err := VerifyAt(bytes.NewReader(b[:500]), 500, hostExpect); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("short slot: %v", err)
	}
}

// smallReads is a ReaderAt that returns at most n bytes per call (short
// reads without an error, which io.ReaderAt does not promise never to
// do), with io.EOF at the end as bytes.Reader does.
type smallReads struct {
	b []byte
	n int
}

func (s smallReads) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(s.b)) {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), s.n)], s.b[off:])
	if off+int64(k) == int64(len(s.b)) && k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

// TestPackToIsPack: the streaming packer writes exactly Pack's bytes and
// returns their length and SHA-256, for any executable size (padding to
// 4 and 16 bytes), with or without the executable's hash given, and
// whatever the reader returns per call.
func TestPackToIsPack(t *testing.T) {
	for _, size := range []int{0, 1, 3, 4, 5, 10, 255, 256<<10 - 1, 256 << 10, 256<<10 + 7, 700001} {
		exe := make([]byte, size)
		for i := range exe {
			exe[i] = byte(i*7 + i>>9)
		}
		want := mustPack(t, testDesc(), exe)
		given := testDesc()
		given.ELFSHA256 = sha256.Sum256(exe)
		for _, tc := range []struct {
			name string
			d    Desc
			r    io.ReaderAt
		}{
			{"hashed here", testDesc(), bytes.NewReader(exe)},
			{"hash given", given, bytes.NewReader(exe)},
			{"small reads", testDesc(), smallReads{exe, 1000}},
		} {
			var got bytes.Buffer
			n, sum, err := PackTo(&got, tc.d, tc.r, int64(size))
			if err != nil {
				t.Fatalf("%d bytes, %s: %v", size, tc.name, err)
			}
			if !bytes.Equal(got.Bytes(), want) || n != int64(len(want)) || sum != sha256.Sum256(want) {
				t.Fatalf("%d bytes, %s: PackTo wrote %d bytes (says %d), Pack %d; same bytes %v, same sum %v",
					size, tc.name, got.Len(), n, len(want), bytes.Equal(got.Bytes(), want), sum == sha256.Sum256(want))
			}
		}
	}
	// An executable shorter than it is said to be is an error, not a
	// short image.
	if _, _, err := PackTo(io.Discard, testDesc(), bytes.NewReader(make([]byte, 10)), 20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short executable: %v", err)
	}
	// So is a writer that fails.
	if _, _, err := PackTo(failWriter{}, testDesc(), bytes.NewReader(make([]byte, 10)), 10); err == nil {
		t.Error("a failing writer went unnoticed")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
