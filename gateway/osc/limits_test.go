package osc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/gateway/audit"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
)

func encodeBundle(t *testing.T, tt Timetag, elems ...Packet) []byte {
	t.Helper()
	b, err := Encode(&Bundle{Time: tt, Elements: elems})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls cond (real time, bounded by 6 waits: a loaded machine
// under -race handles thousands of messages slowly): for state another
// goroutine changes, never for a timer of the server's.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(6 * wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBundleBeyondHorizonRefused: a bundle timed further ahead than the
// fire horizon (fleet.MaxFireLead), or holding a nested one that is, is
// refused at once (every message answered with ErrTooFar), counted and
// recorded; nothing is scheduled, nothing reaches the fleet. Under
// --osc-access none such a bundle is decided (denied) at once too.
func TestBundleBeyondHorizonRefused(t *testing.T) {
	for _, role := range []auth.Role{auth.RoleOperator, auth.RoleNone} {
		t.Run(role.String(), func(t *testing.T) {
			r := newRig(t, role, nil)
			p := r.udp(t)
			y2036 := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
			p.sendRaw(encodeBundle(t, TimetagOf(y2036),
				&Message{Address: "/holo/all/leds/off"}, &Message{Address: "/holo/thump"}))
			p.sendRaw(encodeBundle(t, TimetagOf(r.clk.Now().Add(5*time.Second)),
				&Bundle{Time: TimetagOf(y2036), Elements: []Packet{&Message{Address: "/holo/board/b1/scene/end"}}}))
			want := StatusError
			if role == auth.RoleNone {
				want = StatusDenied
			}
			for addr, rep := range p.repliesTo("/holo/all/leds/off", "/holo/thump", "/holo/board/b1/scene/end") {
				if rep.Status != want {
					t.Errorf("%s: %+v, want %s", addr, rep, want)
				}
				if role != auth.RoleNone && !strings.Contains(fmt.Sprint(rep.Data), ErrTooFar.Error()) {
					t.Errorf("%s: %s, want %q", addr, rep.Data, ErrTooFar)
				}
			}
			if n := r.clk.Waiters(); n != 0 {
				t.Errorf("%d timers armed for refused bundles", n)
			}
			if calls := r.fleet.takeCalls(); len(calls) != 0 {
				t.Errorf("the fleet got %+v", calls)
			}
			if role == auth.RoleNone {
				return
			}
			if v := testutil.ToFloat64(r.s.m.refused.WithLabelValues("horizon")); v != 2 {
				t.Errorf("refused{horizon} = %v, want 2", v)
			}
			n := 0
			for _, rec := range r.audit.records() {
				if rec.Operation == "#bundle" && !rec.Allowed && rec.Code == "InvalidArgument" {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%d audit records of refused bundles, want 2: %+v", n, r.audit.records())
			}
		})
	}
}

// TestTimedBundlesCapped: timed bundles waiting for their moment are
// capped per source host and in all; one beyond is refused (ErrBusy)
// and counted; a slot is free again once its bundle ran.
func TestTimedBundlesCapped(t *testing.T) {
	for _, tc := range []struct {
		name           string
		perSource, all int
		accepted       int
	}{
		{"per source", 2, 100, 2},
		{"in all", 100, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, auth.RoleOperator, func(o *Options) { o.MaxTimedPerSource, o.MaxTimed = tc.perSource, tc.all })
			p := r.udp(t)
			at := TimetagOf(r.clk.Now().Add(10 * time.Second))
			for range tc.accepted {
				p.sendRaw(encodeBundle(t, at, &Message{Address: "/holo/thump"}))
			}
			if !r.clk.WaitForWaiters(tc.accepted, wait) {
				t.Fatalf("not %d bundles waiting", tc.accepted)
			}
			p.sendRaw(encodeBundle(t, at, &Message{Address: "/holo/alwaysReply", Args: []any{int32(1)}}))
			rep := p.replyTo("/holo/alwaysReply")
			if rep.Status != StatusError || !strings.Contains(fmt.Sprint(rep.Data), ErrBusy.Error()) {
				t.Fatalf("bundle beyond the cap: %+v, want %v", rep, ErrBusy)
			}
			if v := testutil.ToFloat64(r.s.m.refused.WithLabelValues("capacity")); v != 1 {
				t.Errorf("refused{capacity} = %v, want 1", v)
			}
			if n := r.clk.Waiters(); n != tc.accepted {
				t.Errorf("%d timers, want %d", n, tc.accepted)
			}
			// The moment comes: they run, their slots are free.
			r.clk.Advance(10 * time.Second)
			for range tc.accepted {
				p.replyTo("/holo/thump")
			}
			waitFor(t, "the slots released", func() bool { return testutil.ToFloat64(r.s.m.timed) == 0 })
			p.sendRaw(encodeBundle(t, TimetagOf(r.clk.Now().Add(time.Second)), &Message{Address: "/holo/thump"}))
			if !r.clk.WaitForWaiters(1, wait) {
				t.Fatal("a bundle after the others ran was not taken")
			}
			r.clk.Advance(time.Second)
			if rep := p.replyTo("/holo/thump"); rep.Status != StatusOK {
				t.Fatalf("%+v", rep)
			}
		})
	}

}

// TestAccessNoneFloodKeepsAudit: under --osc-access none a flood of
// bundles (issue 25 row 10: 65 packets made 142,412 records and pruned
// every older one) is refused and recorded aggregated, apart: an
// authenticated record written before stays, and the refusals make one
// record per source host and second, with their count.
func TestAccessNoneFloodKeepsAudit(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var log *audit.Log
	r := newRig(t, auth.RoleNone, func(o *Options) {
		log, err = audit.Open(audit.Options{DB: db, MaxRecords: 50, Now: r0Now(o)})
		if err != nil {
			t.Fatal(err)
		}
		o.Guard.Audit = log
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- log.Run(ctx) }()
	defer func() { cancel(); <-done }()
	log.Audit(auth.Record{Time: r.clk.Now(), Attributes: auth.Attributes{Who: auth.Identity{Name: "ops", Role: auth.RoleOperator, Token: true},
		Surface: auth.SurfaceREST, Verb: auth.VerbAct, Resource: auth.ResActions}, Allowed: true, Code: auth.CodeOK})

	p := r.udp(t)
	var elems []Packet
	for range 200 {
		elems = append(elems, &Message{Address: "/holo/all/leds/off"})
	}
	const packets = 4
	for range packets {
		p.sendRaw(encodeBundle(t, Immediately, elems...))
	}
	waitFor(t, "every message refused", func() bool {
		return testutil.ToFloat64(r.s.m.messages.WithLabelValues(ClassLEDs, StatusDenied)) == packets*200
	})
	sctx, scancel := context.WithTimeout(context.Background(), wait)
	defer scancel()
	if err := log.Sync(sctx); err != nil {
		t.Fatal(err)
	}
	got, err := log.Query(audit.Filter{Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 2 && got[0].Token == "ops" { // same time: either order
		got[0], got[1] = got[1], got[0]
	}
	if len(got) != 2 || got[1].Token != "ops" || got[0].Count != packets*200 || got[0].Surface != "osc" {
		t.Fatalf("records after the flood: %+v", got)
	}
}

func r0Now(o *Options) func() time.Time { return o.Clock.Now }

// TestReplyAmplificationBounded: issue 25 row 13: /holo/replyPort <victim
// port>, then a bundle of bad messages as big as a packet goes: 2,001
// replies (320 KB, ~5x) went to the victim. The replies to one packet
// now weigh at most the packet plus ReplyAllowance, and a host gets at
// most ReplyRate replies a second.
func TestReplyAmplificationBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate int
	}{{"default rate", 0}, {"bytes alone", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, auth.RoleOperator, func(o *Options) { o.ReplyRate = tc.rate })
			attacker := r.udp(t)
			victim := r.udp(t)
			vport := int32(victim.conn.LocalAddr().(*net.UDPAddr).Port)

			setPort, _ := Encode(&Message{Address: "/holo/replyPort", Args: []any{vport}})
			attacker.sendRaw(setPort)
			// "/x" with no argument: 8 bytes, 12 in a bundle; 16 KB of
			// them (the attack's 64 KB take long under -race).
			elems := make([]Packet, (MaxPacket/4)/12)
			for i := range elems {
				elems[i] = &Message{Address: "/x"}
			}
			bundle := encodeBundle(t, Immediately, elems...)
			attacker.sendRaw(bundle)
			in := len(setPort) + len(bundle)
			total := func() float64 {
				n := 0.0
				for _, o := range []string{"sent", "size", "rate"} {
					n += testutil.ToFloat64(r.s.m.replies.WithLabelValues(o))
				}
				return n
			}
			waitFor(t, "every message answered or dropped", func() bool { return total() == float64(1+len(elems)) })
			sent := int(testutil.ToFloat64(r.s.m.replies.WithLabelValues("sent")))
			// Every reply went to the victim's port (the first is
			// replyPort's); the server counts their bytes (the victim's
			// socket may drop some when it is full).
			if m := victim.next(); m.Address != "/reply/holo/replyPort" {
				t.Fatalf("the victim got %s first", m.Address)
			}
			got := int(testutil.ToFloat64(r.s.m.replyBytes))
			if limit := in + 2*DefaultReplyAllowance; got > limit {
				t.Errorf("the victim got %d bytes of replies to %d bytes sent (limit %d)", got, in, limit)
			}
			if tc.rate == 0 && sent > DefaultReplyRate {
				t.Errorf("%d replies in one second, want at most %d", sent, DefaultReplyRate)
			}
			t.Logf("%d messages, %d bytes in; %d replies, %d bytes out", 1+len(elems), in, sent, got)
		})
	}
}

// TestReplyRatePerHost: a host gets at most ReplyRate replies a second,
// whatever it sends; the next second it gets answers again.
func TestReplyRatePerHost(t *testing.T) {
	r := newRig(t, auth.RoleOperator, func(o *Options) { o.ReplyRate = 5 })
	p := r.udp(t)
	for range 8 {
		p.send("/holo/thump")
	}
	// A message is counted before its reply is sent or dropped: wait for
	// the replies' outcomes too.
	waitFor(t, "8 thumps handled and answered or dropped", func() bool {
		return testutil.ToFloat64(r.s.m.messages.WithLabelValues(ClassSession, StatusOK)) == 8 &&
			testutil.ToFloat64(r.s.m.replies.WithLabelValues("sent"))+testutil.ToFloat64(r.s.m.replies.WithLabelValues("rate")) == 8
	})
	if v := testutil.ToFloat64(r.s.m.replies.WithLabelValues("rate")); v != 3 {
		t.Errorf("%v replies dropped for the rate, want 3", v)
	}
	for range 5 {
		p.replyTo("/holo/thump")
	}
	r.clk.Advance(time.Second)
	if rep := p.call("/holo/thump"); rep.Status != StatusOK {
		t.Fatalf("%+v", rep)
	}
}

// closedByServer reports whether the server closed p's connection (a
// read ends with EOF or a reset, not a timeout).
func closedByServer(p *tcpPeer) bool {
	_ = p.conn.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	_, err := p.conn.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestTCPConnectionsCapped: issue 25 row 9: 1,500 connections each
// subscribed made 4,713 goroutines. TCP connections are capped per source
// host and in all; one beyond is closed at once; a slot is free again when
// a connection ends.
func TestTCPConnectionsCapped(t *testing.T) {
	for _, tc := range []struct {
		name         string
		perHost, all int
	}{{"per host", 2, 100}, {"in all", 100, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, auth.RoleViewer, func(o *Options) { o.MaxConnsPerHost, o.MaxConns = tc.perHost, tc.all })
			a, b := r.tcp(t), r.tcp(t)
			for _, p := range []*tcpPeer{a, b} {
				p.send("/holo/thump")
				if m := p.next(); m.Address != "/reply/holo/thump" {
					t.Fatalf("got %s", m.Address)
				}
			}
			c := r.tcp(t)
			if !closedByServer(c) {
				t.Fatal("a third connection was kept")
			}
			if v := testutil.ToFloat64(r.s.m.limited.WithLabelValues("connections")); v != 1 {
				t.Errorf("limited{connections} = %v", v)
			}
			a.conn.Close()
			waitFor(t, "the connection's slot given back", func() bool { return testutil.ToFloat64(r.s.m.conns) == 1 })
			d := r.tcp(t)
			d.send("/holo/thump")
			if m := d.next(); m.Address != "/reply/holo/thump" {
				t.Fatalf("got %s", m.Address)
			}
		})
	}
}

// TestIdleTCPClosed: a TCP connection that sends nothing for IdleTimeout
// (on the server's clock) is closed; each packet starts the wait again.
func TestIdleTCPClosed(t *testing.T) {
	r := newRig(t, auth.RoleViewer, func(o *Options) { o.IdleTimeout = time.Minute })
	p := r.tcp(t)
	p.send("/holo/thump")
	p.next()
	if !r.clk.WaitForWaiters(1, wait) {
		t.Fatal("no idle timer")
	}
	for range 3 { // 50 s apart: never idle for a minute
		r.clk.Advance(50 * time.Second)
		p.send("/holo/thump")
		if m := p.next(); m.Address != "/reply/holo/thump" {
			t.Fatalf("got %s", m.Address)
		}
	}
	r.clk.Advance(time.Minute)
	if !closedByServer(p) {
		t.Fatal("an idle connection was kept")
	}
	if v := testutil.ToFloat64(r.s.m.limited.WithLabelValues("idle")); v != 1 {
		t.Errorf("limited{idle} = %v", v)
	}
}

// TestSubscribersCapped: subscribers are capped per source host and in
// all; a subscription beyond is answered error; one ending frees its
// slot.
func TestSubscribersCapped(t *testing.T) {
	for _, tc := range []struct {
		name         string
		perHost, all int
	}{{"per host", 1, 100}, {"in all", 100, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, auth.RoleViewer, func(o *Options) { o.MaxSubscribersPerHost, o.MaxSubscribers = tc.perHost, tc.all })
			a, b := r.tcp(t), r.tcp(t)
			call := func(p *tcpPeer, addr string, args ...any) reply {
				p.send(addr, args...)
				for {
					if m := p.next(); m.Address == "/reply"+addr {
						return parseReply(t, m)
					}
				}
			}
			if rep := call(a, "/holo/subscribe", "/holo/all"); rep.Status != StatusOK {
				t.Fatalf("first subscriber: %+v", rep)
			}
			if rep := call(a, "/holo/subscribe", "/holo/board/b1"); rep.Status != StatusOK {
				t.Fatalf("a second pattern of the same subscriber: %+v", rep)
			}
			rep := call(b, "/holo/subscribe", "/holo/all")
			if rep.Status != StatusError || !strings.Contains(fmt.Sprint(rep.Data), ErrTooMany.Error()) {
				t.Fatalf("second subscriber: %+v, want %v", rep, ErrTooMany)
			}
			if v := testutil.ToFloat64(r.s.m.limited.WithLabelValues("subscribers")); v != 1 {
				t.Errorf("limited{subscribers} = %v", v)
			}
			call(a, "/holo/unsubscribe")
			if rep := call(b, "/holo/subscribe", "/holo/all"); rep.Status != StatusOK {
				t.Fatalf("after the first unsubscribed: %+v", rep)
			}
		})
	}
}

// TestFeedbackBytesBounded: the feedback waiting for a subscriber that
// reads nothing is bounded in bytes (MaxFeedbackBytes), not only in
// messages: it is dropped long before Queue messages of 60 KB wait.
func TestFeedbackBytesBounded(t *testing.T) {
	const queue = 2048
	r := newRig(t, auth.RoleViewer, func(o *Options) { o.Queue, o.MaxFeedbackBytes = queue, 256<<10 })
	p := r.tcp(t)
	p.send("/holo/subscribe", "/holo/all")
	if m := p.next(); parseReply(t, m).Status != StatusOK {
		t.Fatalf("subscribe: %v", m.Args)
	}
	w := r.fleet.nextWatch(t)
	big := json.RawMessage(`"` + strings.Repeat("x", 60000) + `"`)
	for range 2 * queue {
		select {
		case <-w.ctx.Done():
		case w.ch <- fleet.Event{Board: "b1", Type: fleet.EventState, Kind: "leds", Data: big}:
			continue
		}
		break
	}
	w.ended(t)
	// The sockets take some MB; the queue 256 KB more.
	if n := testutil.ToFloat64(r.s.m.feedback); n >= queue {
		t.Errorf("dropped after %v messages of 60 KB queued, want before the queue's %d", n, queue)
	}
	if v := testutil.ToFloat64(r.s.m.dropped); v != 1 {
		t.Errorf("dropped %v", v)
	}
}
