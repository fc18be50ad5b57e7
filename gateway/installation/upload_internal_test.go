package installation

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// parts returns a next function giving cs in order, then io.EOF.
func parts(cs ...Part) func() (Part, error) {
	return func() (Part, error) {
		if len(cs) == 0 {
			return Part{}, io.EOF
		}
		p := cs[0]
		cs = cs[1:]
		return p, nil
	}
}

func chunk(s string) Part { return Part{Chunk: []byte(s)} }

// TestChunks: an upload's bytes are exactly its chunks when they sum to
// the declared size; any other sum, or a second header, ends the reader
// with ErrContent, and it never yields more than the declared size.
func TestChunks(t *testing.T) {
	failed := errors.New("stream broke")
	for _, tc := range []struct {
		name  string
		size  int64
		parts []Part
		fail  error // after parts, instead of io.EOF
		want  string
		err   error
	}{
		{name: "empty file", size: 0, want: ""},
		{name: "one chunk", size: 5, parts: []Part{chunk("hello")}, want: "hello"},
		{name: "many chunks", size: 11, parts: []Part{chunk("hel"), chunk("lo "), chunk("world")}, want: "hello world"},
		{name: "empty chunks between", size: 2, parts: []Part{chunk(""), chunk("a"), chunk(""), chunk("b"), chunk("")}, want: "ab"},
		{name: "short", size: 6, parts: []Part{chunk("hello")}, err: ErrContent},
		{name: "nothing sent", size: 1, err: ErrContent},
		{name: "long", size: 4, parts: []Part{chunk("hello")}, err: ErrContent},
		{name: "long in a later chunk", size: 6, parts: []Part{chunk("hello"), chunk("!!")}, err: ErrContent},
		{name: "size 0 with a chunk", size: 0, parts: []Part{chunk("x")}, err: ErrContent},
		{name: "second header", size: 5, parts: []Part{chunk("he"), {Header: true}, chunk("llo")}, err: ErrContent},
		{name: "stream error", size: 5, parts: []Part{chunk("he")}, fail: failed, err: failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := parts(tc.parts...)
			if tc.fail != nil {
				inner := next
				next = func() (Part, error) {
					p, err := inner()
					if errors.Is(err, io.EOF) {
						return Part{}, tc.fail
					}
					return p, err
				}
			}
			got, err := io.ReadAll(Upload{Size: tc.size}.Chunks(next))
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if int64(len(got)) > tc.size {
				t.Fatalf("read %d bytes of a %d-byte upload", len(got), tc.size)
			}
			if tc.err == nil && string(got) != tc.want {
				t.Fatalf("read %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUploadCheck: headers the store would never keep are refused before
// a byte is read.
func TestUploadCheck(t *testing.T) {
	sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, tc := range []struct {
		u  Upload
		ok bool
	}{
		{Upload{Size: 0}, true},
		{Upload{Size: MaxContent, SHA256: sha}, true},
		{Upload{Size: 1, SHA256: "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"}, true},
		{Upload{Size: MaxContent + 1}, false},
		{Upload{Size: -1}, false},
		{Upload{Size: 1, SHA256: sha[:63]}, false},
		{Upload{Size: 1, SHA256: sha[:63] + "g"}, false},
	} {
		if err := tc.u.Check(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrContent)) {
			t.Errorf("%+v: %v", tc.u, err)
		}
	}
}

// FuzzChunks cuts data into chunks at the fuzzer's points (cuts: one
// byte per chunk, its length) against a declared size: the reader yields
// data exactly when the chunks sum to the size, and otherwise fails with
// ErrContent having yielded at most size bytes.
func FuzzChunks(f *testing.F) {
	f.Add([]byte("hello world"), []byte{3, 0, 8}, int64(11), -1)
	f.Add([]byte("hello"), []byte{}, int64(4), 2)
	f.Add([]byte(""), []byte{0}, int64(0), -1)
	f.Fuzz(func(t *testing.T, data, cuts []byte, size int64, header int) {
		var ps []Part
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(int(cuts[i]), len(rest))
			}
			if i == header {
				ps = append(ps, Part{Header: true})
			}
			ps = append(ps, Part{Chunk: rest[:n]})
			rest = rest[n:]
		}
		got, err := io.ReadAll(Upload{Size: size}.Chunks(parts(ps...)))
		if size >= 0 && int64(len(got)) > size {
			t.Fatalf("read %d bytes of a %d-byte upload", len(got), size)
		}
		headerSent := false
		for _, p := range ps {
			headerSent = headerSent || p.Header
		}
		if int64(len(data)) == size && !headerSent {
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read %q %v, want %q", got, err, data)
			}
			return
		}
		if !errors.Is(err, ErrContent) {
			t.Fatalf("chunks of %d bytes (header %v) against size %d: %v", len(data), headerSent, size, err)
		}
	})
}
