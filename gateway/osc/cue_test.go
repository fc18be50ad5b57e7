package osc

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
)

func showList() cue.List {
	leds := func(sel fleet.Selector, body string) []cue.Action {
		return []cue.Action{{Kind: "leds", Selector: sel, Body: json.RawMessage(body)}}
	}
	return cue.List{Name: "demo", Cues: []cue.Cue{
		{Number: "1", Actions: leds(fleet.Selector{Groups: []int{1}}, `{"mode":"solid","colour":"red","loop":true}`)},
		{Number: "2", Actions: leds(fleet.Selector{Groups: []int{2}}, `{"mode":"solid","colour":"blue","loop":true}`)},
		{Number: "3", Timecode: "00:00:10:00", Actions: leds(fleet.Selector{All: true}, `{"mode":"off"}`)},
	}}
}

// cueRig is an OSC server with a cue engine on the rig's fake clock and
// fleet.
func cueRig(t *testing.T, role auth.Role) (*rig, *cue.Engine) {
	t.Helper()
	var eng *cue.Engine
	r := newRig(t, role, func(o *Options) {
		var err error
		eng, err = cue.New(cue.Options{Fleet: o.Fleet, Clock: o.Clock})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Put(showList()); err != nil {
			t.Fatal(err)
		}
		o.Cues = eng
	})
	t.Cleanup(eng.Close)
	return r, eng
}

// waitCalls waits until the fleet was asked n actions and returns them.
func waitCalls(t *testing.T, f *fakeFleet, n int) []fakeCall {
	t.Helper()
	var got []fakeCall
	deadline := time.Now().Add(wait)
	for len(got) < n {
		got = append(got, f.takeCalls()...)
		if time.Now().After(deadline) {
			t.Fatalf("%d fleet calls, want %d: %+v", len(got), n, got)
		}
		time.Sleep(time.Millisecond)
	}
	return got
}

func TestCueAddresses(t *testing.T) {
	r, eng := cueRig(t, auth.RoleOperator)
	p := r.udp(t)
	now := r.clk.Now()
	rep := p.call("/holo/cue/go")
	if rep.Status != StatusOK || !strings.Contains(string(mustJSON(t, rep.Data)), `"standby":"2"`) {
		t.Fatalf("GO: %+v", rep)
	}
	c := waitCalls(t, r.fleet, 1)[0]
	if c.Sel.Groups[0] != 1 || !c.Action.At.Equal(now.Add(cue.DefaultLead)) {
		t.Fatalf("GO fired %+v", c)
	}
	for _, step := range []struct {
		addr   string
		args   []any
		status string
		has    string
	}{
		{"/holo/cuelist/demo/cue/3/start", nil, StatusOK, `"standby":""`},
		{"/holo/cue/1/standby", nil, StatusOK, `"standby":"1"`},
		{"/holo/cuelist/demo/back", nil, StatusOK, `"standby":"1"`},
		{"/holo/cuelist/demo/state", nil, StatusOK, `"list":"demo"`},
		{"/holo/cue/9/start", nil, StatusError, "no such cue"},
		{"/holo/cuelist/nope/go", nil, StatusError, "no such cue list"},
		{"/holo/cue/go", []any{int32(1)}, StatusError, "takes no arguments"},
		{"/holo/cue/stop", nil, StatusOK, `"running":[]`},
		{"/holo/timecode", []any{"99:00:00:00"}, StatusError, "bad timecode"},
		{"/holo/timecode", []any{"00:00:01:00", "23.976"}, StatusError, "bad rate"},
		{"/holo/timecode", []any{int32(1)}, StatusError, "takes s"},
	} {
		rep := p.call(step.addr, step.args...)
		if rep.Status != step.status || !strings.Contains(string(mustJSON(t, rep.Data)), step.has) {
			t.Fatalf("%s %v: %+v, want %s with %q", step.addr, step.args, rep, step.status, step.has)
		}
	}
	waitCalls(t, r.fleet, 1) // cue 3's start
	// Timecode as h m s f at 25 fps passes cue 3 (00:00:10:00): the first
	// frame chases to it. A frame taken is not answered.
	p.send("/holo/timecode", int32(0), int32(0), int32(10), int32(5), int32(25))
	if c := waitCalls(t, r.fleet, 1)[0]; !c.Sel.All {
		t.Fatalf("timecode fired %+v", c)
	}
	if st, _ := eng.State("demo"); st.Timecode == nil || st.Timecode.Rate != "25" || st.Timecode.Position != "00:00:10:05" || st.Timecode.Source != "osc" {
		t.Fatalf("chase: %+v", st.Timecode)
	}
	// The next message's reply is the next datagram: no reply came for
	// the frame.
	p.send("/holo/cue/state")
	if m := p.next(); m.Address != "/reply/holo/cue/state" {
		t.Fatalf("after a timecode frame: %s", m.Address)
	}
	// Runs were audited with resource cues; frames were not.
	var acts, frames int
	for _, rec := range r.audit.records() {
		if rec.Resource == auth.ResCues && rec.Allowed && rec.Verb == auth.VerbAct {
			acts++
			if rec.Operation == "/holo/timecode" {
				frames++
			}
		}
	}
	if acts < 5 || frames != 0 {
		t.Fatalf("audit: %d runs, %d frames", acts, frames)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCueAccess: under --osc-access read a GO is denied and nothing
// fires; the state may be read; under none everything is denied.
func TestCueAccess(t *testing.T) {
	r, _ := cueRig(t, auth.RoleViewer)
	p := r.udp(t)
	if rep := p.call("/holo/cue/go"); rep.Status != StatusDenied {
		t.Fatalf("viewer GO: %+v", rep)
	}
	if rep := p.call("/holo/timecode", "00:00:10:00"); rep.Status != StatusDenied {
		t.Fatalf("viewer timecode: %+v", rep)
	}
	if rep := p.call("/holo/cue/state"); rep.Status != StatusOK {
		t.Fatalf("viewer state: %+v", rep)
	}
	if c := r.fleet.takeCalls(); len(c) != 0 {
		t.Fatalf("a refused GO fired: %+v", c)
	}
	r2, _ := cueRig(t, auth.RoleNone)
	p2 := r2.udp(t)
	for _, a := range []string{"/holo/cue/go", "/holo/cue/state", "/holo/cuelist/demo/stop"} {
		if rep := p2.call(a); rep.Status != StatusDenied {
			t.Fatalf("none %s: %+v", a, rep)
		}
	}
}

// TestCueFeedback: a subscriber of /holo/cuelist/<pattern> gets the
// list's state at every change; a subscriber of boards only does not.
func TestCueFeedback(t *testing.T) {
	r, eng := cueRig(t, auth.RoleOperator)
	p := r.udp(t)
	if rep := p.call("/holo/subscribe", "/holo/cuelist/d*"); rep.Status != StatusOK {
		t.Fatalf("subscribe: %+v", rep)
	}
	r.fleet.nextWatch(t)
	p.send("/holo/cue/go")
	seen := map[string]bool{}
	for !seen[cue.EventGo] || !seen[cue.EventFired] || !seen["reply"] {
		m := p.next()
		if m.Address == "/reply/holo/cue/go" {
			seen["reply"] = true
			continue
		}
		if m.Address != "/holo/cuelist/demo/state" {
			t.Fatalf("feedback %s", m.Address)
		}
		var ev cue.Event
		if err := json.Unmarshal([]byte(m.Args[0].(string)), &ev); err != nil {
			t.Fatal(err)
		}
		seen[ev.Type] = true
	}
	// Subscribed to boards only, the client gets no cue feedback.
	if rep := p.call("/holo/unsubscribe"); rep.Status != StatusOK {
		t.Fatal(rep)
	}
	if rep := p.call("/holo/subscribe", "/holo/all"); rep.Status != StatusOK {
		t.Fatal(rep)
	}
	r.fleet.nextWatch(t)
	if rep := p.call("/holo/cue/go"); rep.Status != StatusOK {
		t.Fatal(rep)
	}
	deadline := time.Now().Add(wait)
	for st, _ := eng.State("demo"); st.Last == nil || st.Last.Cue != "2"; st, _ = eng.State("demo") {
		if time.Now().After(deadline) {
			t.Fatal("cue 2 never fired")
		}
		time.Sleep(time.Millisecond)
	}
	p.send("/holo/thump")
	if m := p.next(); m.Address != "/reply/holo/thump" {
		t.Fatalf("a board subscriber got %s", m.Address)
	}
}

// TestTimecodeSender: a sender in the test plays timecode over UDP in
// real time, at 25 and at 30 fps: playing past cue 3 (00:00:10:00) fires
// it, a jump back to before it fires nothing (no cue before), playing
// past it again fires it again, and a dropout just before it freewheels
// over it and then stops.
func TestTimecodeSender(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	for _, fps := range []int32{25, 30} {
		t.Run(strconv.Itoa(int(fps)), func(t *testing.T) {
			var eng *cue.Engine
			r := newRig(t, auth.RoleOperator, func(o *Options) {
				var err error
				eng, err = cue.New(cue.Options{Fleet: o.Fleet, Freewheel: 10}) // the real clock
				if err != nil {
					t.Fatal(err)
				}
				if _, err := eng.Put(showList()); err != nil {
					t.Fatal(err)
				}
				o.Cues = eng
			})
			t.Cleanup(eng.Close)
			p := r.udp(t)
			frame := time.Second / time.Duration(fps)
			fires := func() int {
				n := 0
				for _, c := range r.fleet.takeCalls() {
					if c.Sel.All {
						n++
					}
				}
				return n
			}
			total := 0
			waitFires := func(want int, what string) {
				t.Helper()
				deadline := time.Now().Add(wait)
				for total < want {
					total += fires()
					if time.Now().After(deadline) {
						t.Fatalf("%s: %d fires of cue 3, want %d", what, total, want)
					}
					time.Sleep(time.Millisecond)
				}
			}
			// play sends frames from..to (counts at fps), one a frame time.
			play := func(from, to int) {
				tick := time.NewTicker(frame)
				defer tick.Stop()
				for n := from; n <= to; n++ {
					f := int32(n)
					p.send("/holo/timecode", f/fps/3600, f/fps/60%60, f/fps%60, f%fps, fps)
					<-tick.C
				}
			}
			at := func(s, f int) int { return s*int(fps) + f }
			play(at(9, int(fps)-5), at(10, 3))
			waitFires(1, "playing past cue 3")
			play(at(5, 0), at(5, 3)) // a jump back: before every cue
			st, _ := eng.State("demo")
			if st.Standby != "1" || st.Timecode == nil || st.Timecode.Rate != strconv.Itoa(int(fps)) {
				t.Fatalf("after the jump back: %+v %+v", st, st.Timecode)
			}
			play(at(9, int(fps)-3), at(10, 1))
			waitFires(2, "playing past cue 3 again")
			play(at(5, 0), at(5, 0))                   // back again
			play(at(9, int(fps)-4), at(9, int(fps)-2)) // then stop two frames before it
			waitFires(3, "freewheeling over cue 3")
			deadline := time.Now().Add(wait)
			for st, _ := eng.State("demo"); st.Timecode.Status != cue.ChaseStopped; st, _ = eng.State("demo") {
				if time.Now().After(deadline) {
					t.Fatalf("the chase never stopped: %+v", st.Timecode)
				}
				time.Sleep(time.Millisecond)
			}
			if n := total + fires(); n != 3 {
				t.Fatalf("%d fires of cue 3 in all, want 3", n)
			}
		})
	}
}
