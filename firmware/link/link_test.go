package link_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/firmware/link/linktest"
)

func TestConformanceJSONLinesUART(t *testing.T) {
	boardEnd, hostEnd := boardtest.Pipe(t)
	startBoard(t, "", boardEnd, nil)
	h := newHost(t, hostEnd)
	for _, tc := range linktest.Lines {
		t.Run(tc.Name, func(t *testing.T) {
			h.t = t
			rep, _, ok := h.line(tc.Line)
			if !ok {
				t.Fatalf("no reply to %q", tc.Line)
			}
			if rep.Status != tc.Status {
				t.Fatalf("%q: status %d %s, want %d", tc.Line, rep.Status, rep.Body, tc.Status)
			}
			if tc.Code != "" {
				var e struct{ Error, Message string }
				if err := json.Unmarshal(rep.Body, &e); err != nil || e.Error != tc.Code || e.Message == "" {
					t.Fatalf("%q: body %s, want error %s", tc.Line, rep.Body, tc.Code)
				}
			}
			if err := linktest.SubsetMatch(rep.Body, tc.Fields, tc.Keys); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConformanceNativeUART(t *testing.T) {
	boardEnd, hostEnd := boardtest.Pipe(t)
	startBoard(t, "", boardEnd, nil)
	h := newHost(t, hostEnd)
	for _, tc := range linktest.Natives {
		t.Run(tc.Name, func(t *testing.T) {
			h.t = t
			f, hd, body, ok := h.native(1, tc.Req)
			if !ok {
				t.Fatalf("no reply to %v", tc.Req.Type())
			}
			if f.Addr != 1 {
				t.Errorf("reply from address %v", f.Addr)
			}
			if hd.Status != tc.Status {
				t.Fatalf("status %v, want %v", hd.Status, tc.Status)
			}
			if tc.Check != nil {
				if err := tc.Check(body); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// An unknown request type is answered with status 7.
	wire, _ := frame.AppendEncode(nil, frame.Frame{Addr: 1, Seq: 99, Type: 0x60})
	if _, err := hostEnd.Write(wire); err != nil {
		t.Fatal(err)
	}
	it, ok := h.next(3 * time.Second)
	if !ok || it.Data[2] != 0xE0 || it.Data[3] != byte(frame.StatusUnknownType) {
		t.Fatalf("unknown type reply: %x", it.Data)
	}
}

func TestTagsAddressesAndPending(t *testing.T) {
	boardEnd, hostEnd := boardtest.Pipe(t)
	tb := startBoard(t, "", boardEnd, nil)
	h := newHost(t, hostEnd)
	rep, _, _ := h.line("@1 #abc-9 GET /leds")
	if rep.Tag != "abc-9" || rep.Status != 200 || rep.Addr.String() != "@1" {
		t.Fatalf("tagged reply %+v", rep)
	}
	// Another board's address: silence on the wire (the next reply is
	// the next thing on it).
	if _, err := hostEnd.Write([]byte("@7 GET /leds\n")); err != nil {
		t.Fatal(err)
	}
	h.barrier(1)
	// Happenings of the host's kinds are pending until fetched.
	if rep, _, _ := h.line(`PATCH /link/events {"kinds":["clip_ended"]}`); rep.Status != 200 {
		t.Fatal(rep)
	}
	hub := tb.Board.Current().Hub
	hub.Emit("clip_ended", map[string]any{"path": "/a.mov", "finished": true})
	hub.Emit("touch", map[string]any{"action": "down", "x": 1, "y": 2}) // not asked for
	hub.Emit("clip_ended", map[string]any{"path": "/b.mov", "finished": false})
	waitPending(t, h, 2)
	rep, _, _ = h.line("GET /link/events")
	var got link.EventsReply
	if err := json.Unmarshal(rep.Body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 2 || got.Pending != 0 || rep.Pending != 0 {
		t.Fatalf("link events %s (+%d)", rep.Body, rep.Pending)
	}
	// Given: fetching again returns nothing; after= replays kept ones.
	rep, _, _ = h.line("GET /link/events")
	if !strings.Contains(string(rep.Body), `"events":[]`) {
		t.Fatalf("events given twice: %s", rep.Body)
	}
	rep, _, _ = h.line("GET /link/events?after=1")
	if err := json.Unmarshal(rep.Body, &got); err != nil || len(got.Events) != 1 {
		t.Fatalf("after=1: %s", rep.Body)
	}
}

func waitPending(t *testing.T, h *host, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, _, _ := h.line("GET /leds")
		if rep.Pending == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, want %d", rep.Pending, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPushJSONAndNative(t *testing.T) {
	boardEnd, hostEnd := boardtest.Pipe(t)
	tb := startBoard(t, "", boardEnd, nil)
	h := newHost(t, hostEnd)
	if rep, _, _ := h.line(`PATCH /link/events {"kinds":["clip_ended","leds"],"push":true}`); rep.Status != 200 {
		t.Fatal(rep)
	}
	tb.Board.Current().Hub.Emit("clip_ended", map[string]any{"path": "/a.mov", "finished": true})
	_, evs, _ := h.line(`PATCH /leds {"mode":"solid"}`)
	deadline := time.Now().Add(30 * time.Second)
	for len(evs) < 2 && time.Now().Before(deadline) {
		if it, ok := h.next(200 * time.Millisecond); ok && strings.HasPrefix(string(it.Data), "! ") {
			evs = append(evs, it.Data[2:])
		}
	}
	joined := fmt.Sprintf("%s", evs)
	if !strings.Contains(joined, `"event":"clip_ended"`) || !strings.Contains(joined, `"event":"leds"`) {
		t.Fatalf("pushed events: %s", joined)
	}
	// Native: EVENTS_SET with push sends 0x70 frames.
	if _, hd, _, ok := h.native(1, &frame.EventsSetRequest{Kinds: frame.MaskTouch, Push: true}); !ok || hd.Status != frame.StatusOK {
		t.Fatal("events set")
	}
	tb.Board.Current().Hub.Emit("touch", map[string]any{"action": "up", "x": 120, "y": 7})
	for {
		it, ok := h.next(2 * time.Second)
		if !ok {
			t.Fatal("no event frame")
		}
		if it.Kind == 1 && frame.Type(it.Data[2]) == frame.TypeEvent {
			var r frame.Record
			if err := r.UnmarshalBinary(it.Data[3:]); err != nil {
				t.Fatal(err)
			}
			if r.Kind != frame.KindTouch || r.Action != frame.TouchUp || r.X != 120 || r.Y != 7 {
				t.Fatalf("record %+v", r)
			}
			return
		}
	}
}

func TestReadyOnStart(t *testing.T) {
	boardEnd, hostEnd := boardtest.Pipe(t)
	h := newHost(t, hostEnd)
	startBoard(t, "", boardEnd, nil)
	it, ok := h.next(3 * time.Second)
	if !ok || !strings.HasPrefix(string(it.Data), `! {"event":"ready"`) {
		t.Fatalf("first line %q", it.Data)
	}
	var r link.ReadyEvent
	if err := json.Unmarshal(it.Data[2:], &r); err != nil || r.Protocol != 1 || r.Address != 1 || r.Firmware == "" {
		t.Fatalf("ready %s", it.Data)
	}
}

func TestLinkSettings(t *testing.T) {
	boardEnd, hostEnd := boardtest.Pipe(t)
	startBoard(t, "", boardEnd, nil)
	h := newHost(t, hostEnd)
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"address":0}`, 400, "bad_request"},
		{`{"address":224}`, 400, "bad_request"},
		{`{"groups":[1,2,3,4,5,6,7,8,9]}`, 400, "bad_request"},
		{`{"groups":[32]}`, 400, "bad_request"},
		{`{"mode":"spi"}`, 400, "bad_request"},
		{`{"baud":12345}`, 400, "bad_request"},
		{`{"pins":{"tx":48}}`, 409, "pin_in_use"},
		{`{"pins":{"tx":44}}`, 409, "pin_in_use"},
		{`{"mode":"rs485","pins":{"de":15}}`, 409, "pin_in_use"},
		{`{"mode":"rs485","address":9,"groups":[3,1]}`, 200, ""},
	} {
		rep, _, _ := h.line("PATCH /link " + tc.body)
		if rep.Status != tc.status || (tc.code != "" && !strings.Contains(string(rep.Body), tc.code)) {
			t.Errorf("PATCH /link %s: %d %s, want %d %s", tc.body, rep.Status, rep.Body, tc.status, tc.code)
		}
	}
	rep, _, _ := h.line("GET /link")
	var st link.State
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		t.Fatal(err)
	}
	if !st.RestartRequired || st.Saved.Mode != "rs485" || st.Running.Mode != "uart" || fmt.Sprint(st.Saved.Groups) != "[1 3]" {
		t.Fatalf("state %+v", st)
	}
}
