package fleet

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzReports: whatever drivers report (info, states, happenings), the
// core neither panics nor loses its numbering.
func FuzzReports(f *testing.F) {
	f.Add([]byte(`{"id":"b1","hostname":"h","firmware":{"version":"1"}}`), []byte(`{"running":{"groups":[1,2]}}`), uint16(1), uint16(2))
	f.Add([]byte(`{"id":""}`), []byte(`null`), uint16(65535), uint16(1))
	f.Add([]byte(`[`), []byte(`{"running":{"groups":"x"}}`), uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, info, link []byte, s1, s2 uint16) {
		fl := New(Options{BufferSize: 4, WatcherQueue: 2})
		w := fl.Watch(context.Background(), Filter{}, 0)
		ref := Ref{Driver: "lan", Addr: "http://x"}
		fl.Seen(ref, json.RawMessage(info))
		fl.Changed(ref, "link", json.RawMessage(link))
		fl.Happened(ref, []Happening{{Kind: "touch", Seq: s1}, {Kind: "touch", Seq: s2}, {Kind: "touch", Seq: s1}})
		fl.Restarted(ref)
		fl.Lost(ref, "")
		var last uint64
		for _, ev := range drain(w) {
			if ev.N != last+1 {
				t.Fatalf("event N %d after %d", ev.N, last)
			}
			last = ev.N
		}
		st := fl.Stats()
		if st.Events < last {
			t.Fatalf("stats say %d events, watcher saw %d", st.Events, last)
		}
	})
}
