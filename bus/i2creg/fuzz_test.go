package i2creg

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzCommand(f *testing.F) {
	for _, c := range commands {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := c.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", c, err)
		}
		if !bytes.Equal(out, b) {
			t.Errorf("re-encoded % X from % X", out, b)
		}
	})
}

func FuzzResult(f *testing.F) {
	for _, r := range results {
		f.Add(r.raw)
		f.Add(pad(bytes.Clone(r.raw), MaxResultLen))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Result
		if err := r.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := r.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", r, err)
		}
		if !bytes.HasPrefix(b, out) {
			t.Fatalf("re-encoded % X is not a prefix of % X", out, b)
		}
		var r2 Result
		if err := r2.UnmarshalBinary(pad(out, MaxResultLen)); err != nil {
			t.Fatalf("padded re-encoding: %v", err)
		}
		if d := cmp.Diff(r2, r, cmpBytes); d != "" {
			t.Errorf("round trip (-got +want):\n%s", d)
		}
	})
}

func FuzzStatusReg(f *testing.F) {
	f.Add(hx("01 04 0C 32 00 03 04 5A 14 FF 00 00 03 02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s StatusReg
		if err := s.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := s.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", s, err)
		}
		if !bytes.Equal(out, b[:StatusLen]) {
			t.Errorf("re-encoded % X from % X", out, b)
		}
	})
}

func FuzzVersion(f *testing.F) {
	v, _ := Version("1.4.0").AppendBinary(nil)
	f.Add(v)
	f.Add(bytes.Repeat([]byte("a"), VersionLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v Version
		if err := v.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := v.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%q decoded but does not encode: %v", v, err)
		}
		var v2 Version
		if err := v2.UnmarshalBinary(out); err != nil || v2 != v {
			t.Errorf("round trip %q -> %q, %v", v, v2, err)
		}
	})
}
