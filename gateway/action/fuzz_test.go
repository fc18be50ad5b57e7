package action

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecode: any kind and body is refused or decoded, never a panic; a
// decoded body encodes, decodes back to the same value and encodes to
// the same bytes; its native form, when it has one, encodes, parses back
// and means to the board what the JSON means.
func FuzzDecode(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(string(tc.kind), []byte(tc.body))
	}
	f.Add(string(KindHolo), []byte(`{"motion":"nudge","x":-1.28,"y":1e300}`))
	f.Add(string(KindLEDs), []byte(`{"loop":null}`))
	f.Add(string(KindSceneApply), []byte(`{"scene":{"screen":{"path":"/a.mov","loop":false},"then":"off"}}`))
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		b, err := Decode(Kind(kind), body)
		if err != nil {
			return
		}
		r := b.Request()
		again, err := Decode(b.Kind(), r.Body)
		if err != nil {
			t.Fatalf("%s %s: encoded as %s, which does not decode: %v", kind, body, r.Body, err)
		}
		if diff := cmp.Diff(again, b); diff != "" {
			t.Fatalf("%s %s: round trip (-got +want)\n%s", kind, body, diff)
		}
		if r2 := again.Request(); string(r2.Body) != string(r.Body) || r2.Method != r.Method || r2.Path != r.Path {
			t.Fatalf("%s %s: encodes as %s, then %s", kind, body, r.Body, r2.Body)
		}
		if err := sameOnBoard(b); err != nil {
			t.Fatalf("%s %s: %v", kind, body, err)
		}
	})
}
