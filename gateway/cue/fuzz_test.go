package cue

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzListCheck: a cue list as the API takes it (JSON, then Check) never
// panics, and a list that checks is in its canonical form: it checks
// again unchanged, and survives a JSON round trip.
func FuzzListCheck(f *testing.F) {
	seed, _ := json.Marshal(demoList())
	f.Add(seed)
	tc, _ := json.Marshal(tcList())
	f.Add(tc)
	f.Add([]byte(`{"name":"x","cues":[{"number":"01.50","actions":[{"kind":"scene_end","selector":{"all":true}}],"follow":"continue"}]}`))
	f.Add([]byte(`{"name":"x","cues":[{"number":"1","actions":[{"kind":"leds","selector":{"groups":[32]},"body":{}}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l List
		if json.Unmarshal(b, &l) != nil {
			return
		}
		if l.Check() != nil {
			return
		}
		again := l.Clone()
		if err := again.Check(); err != nil || !cmp.Equal(again, l) {
			t.Fatalf("a checked list checks differently: %v\n%s", err, cmp.Diff(again, l))
		}
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var back List
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Check(); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzNumber: a number that parses is canonical (parses to itself) and
// compares equal only to itself.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"1", "1.5", "01.50", "0", "10.000001", "x", "1.", ".5"} {
		f.Add(s, "2")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		na, err := ParseNumber(a)
		if err != nil {
			return
		}
		if again, err := ParseNumber(string(na)); err != nil || again != na {
			t.Fatalf("%q -> %q -> %q, %v", a, na, again, err)
		}
		nb, err := ParseNumber(b)
		if err != nil {
			return
		}
		if (na.Compare(nb) == 0) != (na == nb) || na.Compare(nb) != -nb.Compare(na) {
			t.Fatalf("%s vs %s: %d", na, nb, na.Compare(nb))
		}
	})
}
