package osc

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

func TestDecodeVectors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Packet
	}{
		{"no tags", "/a\x00\x00", &Message{Address: "/a"}},
		{"empty tags", "/foo\x00\x00\x00\x00,\x00\x00\x00", &Message{Address: "/foo"}},
		// The OSC 1.0 spec's own example: /oscillator/4/frequency ,f 440.0
		{"float", "/oscillator/4/frequency\x00,f\x00\x00\x43\xdc\x00\x00",
			&Message{Address: "/oscillator/4/frequency", Args: []any{float32(440)}}},
		{"int string", "/x\x00\x00,is\x00\x00\x00\x00\x07hi\x00\x00",
			&Message{Address: "/x", Args: []any{int32(7), "hi"}}},
		{"negative int", "/x\x00\x00,i\x00\x00\xff\xff\xff\xfe", &Message{Address: "/x", Args: []any{int32(-2)}}},
		{"blob", "/x\x00\x00,b\x00\x00\x00\x00\x00\x03abc\x00", &Message{Address: "/x", Args: []any{[]byte("abc")}}},
		{"TFNI", "/x\x00\x00,TFNI\x00\x00\x00", &Message{Address: "/x", Args: []any{true, false, nil, Impulse{}}}},
		{"timetag", "/x\x00\x00,t\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", &Message{Address: "/x", Args: []any{Immediately}}},
		{"string 4 long", "/x\x00\x00,s\x00\x00abcd\x00\x00\x00\x00", &Message{Address: "/x", Args: []any{"abcd"}}},
		{"bundle", "#bundle\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x08/a\x00\x00,\x00\x00\x00",
			&Bundle{Time: Immediately, Elements: []Packet{&Message{Address: "/a"}}}},
		{"empty bundle", "#bundle\x00\x00\x00\x00\x00\x00\x00\x00\x01", &Bundle{Time: Immediately}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "no tags" {
				return // encoded with its ",": the 1.1 form
			}
			if !bytes.Equal(enc, []byte(tt.in)) {
				t.Fatalf("encoded %q, want %q", enc, tt.in)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"/a",                      // not a multiple of 4
		"/abc",                    // unterminated
		"x\x00\x00\x00",           // no slash
		"/a\x00x",                 // padding not NUL
		"/a\x00\x00i\x00\x00\x00", // tags without ','
		"/a\x00\x00,i\x00\x00",    // int missing
		"/a\x00\x00,q\x00\x00",    // unknown tag
		"/a\x00\x00,\x00\x00\x00\x00\x00\x00\x00",                               // bytes after the arguments
		"/a\x00\x00,b\x00\x00\x00\x00\x00\x09abcd",                              // blob overruns
		"#bundle\x00\x00\x00\x00\x00",                                           // short header
		"#bundle\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x10/a\x00\x00", // element overruns
		"#bundle\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00",           // empty element
		"#bundlx\x00\x00\x00\x00\x00\x00\x00\x00\x01",
	} {
		if p, err := Decode([]byte(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: got %v, %v; want ErrMalformed", in, p, err)
		}
	}
}

func TestDeepBundle(t *testing.T) {
	var p Packet = &Message{Address: "/a"}
	for range MaxDepth + 1 {
		p = &Bundle{Time: Immediately, Elements: []Packet{p}}
	}
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a bundle nested %d deep: %v", MaxDepth+1, err)
	}
}

func TestEncodeUnsupported(t *testing.T) {
	for _, m := range []*Message{
		{Address: "a"},
		{Address: "/a", Args: []any{3}},
		{Address: "/a", Args: []any{"x\x00y"}},
	} {
		if _, err := Encode(m); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%#v: %v", m, err)
		}
	}
}

func TestTimetag(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)
	tt := TimetagOf(at)
	if got := tt.Time(); got.Sub(at).Abs() > time.Microsecond {
		t.Fatalf("round trip %v -> %v", at, got)
	}
	if uint64(tt)&0xffffffff != 1<<30 {
		t.Fatalf("fraction of 0.25 s: %#x", uint64(tt)&0xffffffff)
	}
}

func TestStreamFramings(t *testing.T) {
	m1, _ := Encode(&Message{Address: "/a", Args: []any{int32(1)}})
	// A blob full of SLIP's special bytes.
	m2, _ := Encode(&Message{Address: "/b", Args: []any{[]byte{slipEnd, slipEsc, 0, slipEnd}}})
	for _, f := range []Framing{FramingSize, FramingSLIP} {
		t.Run(f.String(), func(t *testing.T) {
			var s []byte
			s = AppendFrame(s, f, m1)
			s = AppendFrame(s, f, m2)
			r := NewStreamReader(bytes.NewReader(s))
			for _, want := range [][]byte{m1, m2} {
				got, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("got %q want %q", got, want)
				}
			}
			if r.Framing() != f {
				t.Fatalf("framing %v", r.Framing())
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("end: %v", err)
			}
		})
	}
	// SLIP vector: END, escaped END and ESC, END.
	r := NewStreamReader(bytes.NewReader([]byte{0xC0, 0xC0, 'a', 0xDB, 0xDC, 0xDB, 0xDD, 0xC0}))
	got, err := r.Next()
	if err != nil || !bytes.Equal(got, []byte{'a', 0xC0, 0xDB}) {
		t.Fatalf("%q %v", got, err)
	}
	r = NewStreamReader(bytes.NewReader([]byte{0xC0, 'a', 0xDB, 'x', 0xC0}))
	if _, err := r.Next(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad escape: %v", err)
	}
	r = NewStreamReader(bytes.NewReader([]byte{0x7f, 0, 0, 0}))
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge size: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"/x\x00\x00,is\x00\x00\x00\x00\x07hi\x00\x00",
		"#bundle\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x08/a\x00\x00,\x00\x00\x00",
		"/x\x00\x00,b\x00\x00\x00\x00\x00\x03abc\x00",
		"/x\x00\x00,TFNIfhdt\x00\x00\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := Encode(p)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", p, err)
		}
		p2, err := Decode(enc)
		if err != nil {
			t.Fatalf("encoding %q does not decode: %v", enc, err)
		}
		enc2, _ := Encode(p2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed %q to %q", enc, enc2)
		}
	})
}

func FuzzStream(f *testing.F) {
	f.Add([]byte{0xC0, 'a', 0xC0})
	f.Add([]byte{0, 0, 0, 4, '/', 'a', 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewStreamReader(bytes.NewReader(b))
		for range 100 {
			pkt, err := r.Next()
			if err != nil {
				return
			}
			if len(pkt) > MaxPacket {
				t.Fatal("oversized packet")
			}
			// Framing what came out gives it back.
			again, err := NewStreamReader(bytes.NewReader(AppendFrame(nil, r.Framing(), pkt))).Next()
			if len(pkt) > 0 && (err != nil || !bytes.Equal(again, pkt)) {
				t.Fatalf("reframing %q: %q %v", pkt, again, err)
			}
		}
	})
}

func FuzzMatch(f *testing.F) {
	f.Add("/holo/board/*", "/holo/board/b1")
	f.Add("/a/{x,y}[!0-9]?", "/a/xq1")
	f.Fuzz(func(t *testing.T, pattern, addr string) {
		ok := Match(pattern, addr)
		if !IsPattern(pattern) && ok != (pattern == addr) && len(pattern) <= MaxPartLen && len(addr) <= MaxPartLen {
			t.Fatalf("literal %q vs %q: %v", pattern, addr, ok)
		}
	})
}
