package fleet

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/frame"
)

// FuzzNativeForm: any body gives either no native form or a request that
// encodes and parses back to itself.
func FuzzNativeForm(f *testing.F) {
	for _, seed := range []struct{ kind, body string }{
		{ActionSceneApply, `{"slot":3}`}, {ActionSceneApply, `{"name":"x"}`}, {ActionSceneEnd, ``},
		{ActionScreenShow, `{"colour":"#ff8000"}`}, {ActionScreenShow, `{"colour":"1,2,3"}`},
		{ActionLEDs, `{"mode":"solid","colour":"red","brightness":40,"loop":true}`},
		{ActionHolo, `{"motion":"move","x":0.25,"y":-1}`}, {ActionHolo, `{"motion":"nod","duration_ms":1500,"range":40,"count":3}`},
		{ActionHolo, `{"motion":"nudge","x":-1.28,"y":1e300}`}, {ActionLEDs, `{"loop":null}`},
	} {
		f.Add(seed.kind, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		req, ok := nativeForm(kind, body)
		if !ok {
			return
		}
		payload, err := req.AppendBinary(nil)
		if err != nil {
			t.Fatalf("%s %s: native form does not encode: %v", kind, body, err)
		}
		back, err := frame.ParseRequest(frame.Frame{Type: req.Type(), Payload: payload})
		if err != nil {
			t.Fatalf("%s %s: %x does not parse: %v", kind, body, payload, err)
		}
		again, _ := back.AppendBinary(nil)
		if diff := cmp.Diff(again, payload); diff != "" {
			t.Fatalf("round trip (-got +want)\n%s", diff)
		}
	})
}

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
