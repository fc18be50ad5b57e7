package frame

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/cobs"
)

var bytesEqual = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

func FuzzDecode(f *testing.F) {
	for _, p := range packets {
		f.Add(append(cobs.Append([]byte{0}, p.raw), 0))
	}
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, wire []byte) {
		fr, buf, err := Decode(make([]byte, 0, MaxLen), wire)
		if err != nil {
			return
		}
		if len(buf) < MinLen || len(buf) > MaxLen {
			t.Fatalf("decoded %d bytes", len(buf))
		}
		again, err := AppendEncode(nil, fr)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", fr, err)
		}
		fr2, _, err := Decode(nil, again)
		if err != nil {
			t.Fatalf("decode of re-encoded: %v", err)
		}
		if d := cmp.Diff(fr2, fr, bytesEqual); d != "" {
			t.Errorf("round trip (-got +want):\n%s", d)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, p := range packets {
		f.Add(p.raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fr, err := Parse(raw)
		if err != nil {
			return
		}
		wire, err := AppendEncode(nil, fr)
		if err != nil {
			t.Fatalf("encode %+v: %v", fr, err)
		}
		back, err := cobs.Decode(wire[1 : len(wire)-1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, raw) {
			t.Errorf("re-encoded % X, want % X", back, raw)
		}
	})
}

// FuzzRequest covers the Unmarshal of every request payload and of the
// EVENT record, picked by type.
func FuzzRequest(f *testing.F) {
	for _, p := range packets {
		if p.req != nil {
			f.Add(p.raw[2], p.raw[HeaderLen:len(p.raw)-CRCLen])
		}
	}
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		m, err := ParseRequest(Frame{Type: Type(typ), Payload: payload})
		if err != nil {
			return
		}
		b, err := m.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%T %+v decoded but does not encode: %v", m, m, err)
		}
		// Requests read bytes exactly; an EVENT record zeroes unused bytes.
		if len(b) > len(payload) || !bytes.Equal(b, payload[:len(b)]) && Type(typ) != TypeEvent {
			t.Errorf("%T re-encoded % X from % X", m, b, payload)
		}
		m2, err := ParseRequest(Frame{Type: Type(typ), Payload: b})
		if err != nil {
			t.Fatalf("decode of re-encoded: %v", err)
		}
		if d := cmp.Diff(m2, m); d != "" {
			t.Errorf("round trip (-got +want):\n%s", d)
		}
	})
}

// FuzzReply covers the header and the Unmarshal of every reply body,
// picked by type.
func FuzzReply(f *testing.F) {
	for _, p := range packets {
		if p.req == nil {
			f.Add(p.raw[2], p.raw[HeaderLen:len(p.raw)-CRCLen])
		}
	}
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		fr := Frame{Type: Type(typ) | ReplyBit, Payload: payload}
		h, body, err := ParseReply(fr)
		if err != nil {
			return
		}
		var p []byte
		if body == nil {
			p, err = AppendReplyPayload(nil, h, nil)
		} else {
			p, err = AppendReplyPayload(nil, h, body)
		}
		if err != nil {
			t.Fatalf("%+v %T %+v decoded but does not encode: %v", h, body, body, err)
		}
		h2, body2, err := ParseReply(Frame{Type: fr.Type, Payload: p})
		if err != nil {
			t.Fatalf("decode of re-encoded: %v", err)
		}
		if d := cmp.Diff(h2, h); d != "" {
			t.Errorf("header round trip (-got +want):\n%s", d)
		}
		if d := cmp.Diff(body2, body); d != "" {
			t.Errorf("body round trip (-got +want):\n%s", d)
		}
	})
}

func FuzzRecord(f *testing.F) {
	for _, p := range packets {
		if p.raw[2] == byte(TypeEvent) {
			f.Add(p.raw[HeaderLen : len(p.raw)-CRCLen])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if err := r.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := r.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", r, err)
		}
		if len(out) != RecordLen || out[0] != b[0] || out[1] != b[1] || out[2] != b[2] {
			t.Fatalf("re-encoded % X from % X", out, b)
		}
		var r2 Record
		if err := r2.UnmarshalBinary(out); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(r2, r); d != "" {
			t.Errorf("round trip (-got +want):\n%s", d)
		}
	})
}

func FuzzStatusBlock(f *testing.F) {
	f.Add(hx("04 07 2C 01 02 03 50 1E 39 30 00 03"))
	f.Add(hx("00 FF FF FF FF 00 00 01 00 00 02 00 AA"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s StatusBlock
		if err := s.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := s.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", s, err)
		}
		if !bytes.Equal(out, b[:StatusBlockLen]) {
			t.Errorf("re-encoded % X from % X", out, b)
		}
	})
}
