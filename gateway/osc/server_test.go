package osc

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// wait bounds how long a test waits for the server (real time: I/O, never
// a timer of the server's, which runs on the fake clock).
const wait = 5 * time.Second

// fakeFleet is the Fleet the server consumes: known boards, the actions
// asked of it, and watchers the test feeds events to.
type fakeFleet struct {
	boards []fleet.BoardView

	mu       sync.Mutex
	calls    []fakeCall
	watchers []*fakeWatch
	watched  chan *fakeWatch
}

type fakeCall struct {
	Sel    fleet.Selector
	Action fleet.Action
}

type fakeWatch struct {
	ctx context.Context
	ch  chan fleet.Event
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{
		boards: []fleet.BoardView{
			{ID: "b1", Groups: []int{1}, Online: true},
			{ID: "b2", Groups: []int{2}, Online: true},
			{ID: "c3", Groups: []int{1, 3}, Online: true},
		},
		watched: make(chan *fakeWatch, 16),
	}
}

func (f *fakeFleet) Boards(flt fleet.Filter) []fleet.BoardView {
	var out []fleet.BoardView
	for _, b := range f.boards {
		if len(flt.IDs) > 0 && !contains(flt.IDs, b.ID) {
			continue
		}
		out = append(out, b)
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (f *fakeFleet) Do(_ context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{sel, a})
	f.mu.Unlock()
	var res []fleet.Result
	for _, id := range sel.Boards {
		res = append(res, fleet.Result{Board: id, Via: "lan"})
	}
	if len(sel.Boards) == 0 {
		res = append(res, fleet.Result{Board: "*", Via: "group"})
	}
	return res, nil
}

func (f *fakeFleet) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	w := &fakeWatch{ctx: ctx, ch: make(chan fleet.Event, 4096)}
	f.mu.Lock()
	f.watchers = append(f.watchers, w)
	f.mu.Unlock()
	f.watched <- w
	return &fleet.Watcher{C: w.ch, Dropped: func() uint64 { return 0 }}
}

func (f *fakeFleet) takeCalls() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// nextWatch is the watcher of the next subscription started.
func (f *fakeFleet) nextWatch(t *testing.T) *fakeWatch {
	t.Helper()
	select {
	case w := <-f.watched:
		return w
	case <-time.After(wait):
		t.Fatal("no subscription reached the fleet")
		return nil
	}
}

// emit sends events to a watcher.
func (w *fakeWatch) emit(evs ...fleet.Event) {
	for _, ev := range evs {
		w.ch <- ev
	}
}

// ended waits for the watcher's subscription to end.
func (w *fakeWatch) ended(t *testing.T) {
	t.Helper()
	select {
	case <-w.ctx.Done():
	case <-time.After(wait):
		t.Fatal("the subscription did not end")
	}
}

func state(board, kind, data string) fleet.Event {
	return fleet.Event{Board: board, Type: fleet.EventState, Kind: kind, Data: json.RawMessage(data)}
}

// memAudit records the guard's audit records.
type memAudit struct {
	mu   sync.Mutex
	recs []auth.Record
}

func (a *memAudit) Audit(r auth.Record) {
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.mu.Unlock()
}

func (a *memAudit) records() []auth.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]auth.Record(nil), a.recs...)
}

type rig struct {
	s     *Server
	fleet *fakeFleet
	clk   *clock.Fake
	audit *memAudit
	reg   *prometheus.Registry
}

func newRig(t *testing.T, role auth.Role, tune func(*Options)) *rig {
	t.Helper()
	r := &rig{fleet: newFakeFleet(), clk: clock.NewFake(time.Date(2025, 3, 1, 20, 0, 0, 0, time.UTC)),
		audit: &memAudit{}, reg: prometheus.NewRegistry()}
	o := Options{Addr: "127.0.0.1:0", Fleet: r.fleet, Role: role, Clock: r.clk, Registerer: r.reg,
		Guard: &auth.Guard{Audit: r.audit, Now: r.clk.Now}}
	if tune != nil {
		tune(&o)
	}
	s, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			t.Error("Run did not return")
		}
	})
	return r
}

// udpPeer is an OSC client over UDP.
type udpPeer struct {
	t    *testing.T
	conn *net.UDPConn
	to   *net.UDPAddr
}

func (r *rig) udp(t *testing.T) *udpPeer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	to, _ := net.ResolveUDPAddr("udp", r.s.Addr())
	return &udpPeer{t: t, conn: c, to: to}
}

func (p *udpPeer) name() string { return p.conn.LocalAddr().String() }

func (p *udpPeer) sendRaw(b []byte) {
	p.t.Helper()
	if _, err := p.conn.WriteToUDP(b, p.to); err != nil {
		p.t.Fatal(err)
	}
}

func (p *udpPeer) send(addr string, args ...any) {
	p.t.Helper()
	b, err := Encode(&Message{Address: addr, Args: args})
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendRaw(b)
}

// next reads the next message the server sent.
func (p *udpPeer) next() *Message {
	p.t.Helper()
	buf := make([]byte, MaxPacket)
	_ = p.conn.SetReadDeadline(time.Now().Add(wait))
	n, _, err := p.conn.ReadFromUDP(buf)
	if err != nil {
		p.t.Fatalf("nothing from the server: %v", err)
	}
	pk, err := Decode(buf[:n])
	if err != nil {
		p.t.Fatal(err)
	}
	m, ok := pk.(*Message)
	if !ok {
		p.t.Fatalf("got %T", pk)
	}
	return m
}

// call sends a message and returns its reply.
func (p *udpPeer) call(addr string, args ...any) reply {
	p.t.Helper()
	p.send(addr, args...)
	return p.replyTo(addr)
}

// replyTo reads messages until addr's reply (feedback before it is
// skipped).
func (p *udpPeer) replyTo(addr string) reply {
	p.t.Helper()
	for {
		m := p.next()
		if m.Address != "/reply"+addr {
			continue
		}
		return parseReply(p.t, m)
	}
}

// repliesTo reads until the replies to every address in addrs came, in
// any order (the actions of one bundle run concurrently), and returns
// them by address.
func (p *udpPeer) repliesTo(addrs ...string) map[string]reply {
	p.t.Helper()
	want := map[string]bool{}
	for _, a := range addrs {
		want["/reply"+a] = true
	}
	got := map[string]reply{}
	for len(got) < len(addrs) {
		m := p.next()
		if want[m.Address] {
			got[strings.TrimPrefix(m.Address, "/reply")] = parseReply(p.t, m)
		}
	}
	return got
}

func parseReply(t *testing.T, m *Message) reply {
	t.Helper()
	if len(m.Args) != 1 {
		t.Fatalf("reply %s: %v", m.Address, m.Args)
	}
	s, _ := m.Args[0].(string)
	var r reply
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("reply %s: %v: %q", m.Address, err, s)
	}
	return r
}

func TestAccess(t *testing.T) {
	for _, tc := range []struct {
		access string
		role   auth.Role
		show   string
		sub    string
	}{
		{"none", auth.RoleNone, StatusDenied, StatusDenied},
		{"read", auth.RoleViewer, StatusDenied, StatusOK},
		{"show", auth.RoleOperator, StatusOK, StatusOK},
	} {
		t.Run(tc.access, func(t *testing.T) {
			r := newRig(t, tc.role, nil)
			p := r.udp(t)
			if got := p.call("/holo/board/b1/scene", "intro"); got.Status != tc.show {
				t.Errorf("scene: %+v, want %s", got, tc.show)
			}
			if got := p.call("/holo/group/1/leds/off"); got.Status != tc.show {
				t.Errorf("leds/off: %+v, want %s", got, tc.show)
			}
			calls := r.fleet.takeCalls()
			if tc.show == StatusOK && len(calls) != 2 {
				t.Errorf("fleet got %d actions, want 2", len(calls))
			}
			if tc.show == StatusDenied && len(calls) != 0 {
				t.Errorf("a denied command reached the fleet: %+v", calls)
			}
			if got := p.call("/holo/subscribe", "/holo/all"); got.Status != tc.sub {
				t.Errorf("subscribe: %+v, want %s", got, tc.sub)
			}
			if tc.sub == StatusOK {
				w := r.fleet.nextWatch(t)
				w.emit(state("b1", "leds", `{"mode":"solid"}`))
				if m := p.next(); m.Address != "/holo/board/b1/leds" {
					t.Errorf("feedback %s", m.Address)
				}
			}

			who := "osc:" + p.name()
			var refused, allowed int
			for _, rec := range r.audit.records() {
				if rec.Surface != auth.SurfaceOSC || rec.Who.Name != who || rec.Client != p.name() || rec.Who.Role != tc.role {
					t.Errorf("record %+v: want surface osc, identity %s", rec, who)
				}
				if rec.Allowed {
					allowed++
					if rec.Code != auth.CodeOK {
						t.Errorf("allowed record %+v", rec)
					}
					continue
				}
				refused++
				if rec.Code != auth.CodePermissionDenied {
					t.Errorf("refusal %+v: code %s", rec, rec.Code)
				}
			}
			wantRefused := 0
			if tc.show == StatusDenied {
				wantRefused += 2
			}
			if tc.sub == StatusDenied {
				wantRefused++
			}
			wantAllowed := 0 // show actions let in; a subscription is a read, not recorded
			if tc.show == StatusOK {
				wantAllowed = 2
			}
			if refused != wantRefused || allowed != wantAllowed {
				t.Errorf("%d refusals and %d changes recorded, want %d and %d: %+v", refused, allowed, wantRefused, wantAllowed, r.audit.records())
			}
		})
	}
}

// collect reads feedback until n messages came, replies skipped.
func (p *udpPeer) collect(n int) []*Message {
	p.t.Helper()
	var out []*Message
	for len(out) < n {
		m := p.next()
		if strings.HasPrefix(m.Address, "/reply/") {
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestSubscribePattern(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    []string // feedback addresses, in order
	}{
		{"/holo/group/1", []string{"/holo/board/b1/leds 0", "/holo/board/c3/leds 0", "/holo/board/b1/screen 1", "/holo/board/c3/leds 1", "/holo/board/b1/leds 2"}},
		{"/holo/board/b?", []string{"/holo/board/b1/leds 0", "/holo/board/b2/leds 0", "/holo/board/b1/screen 1", "/holo/board/b2/leds 1", "/holo/board/b1/leds 2"}},
		{"/holo/all/leds", []string{"/holo/board/b1/leds 0", "/holo/board/b2/leds 0", "/holo/board/c3/leds 0", "/holo/board/b2/leds 1", "/holo/board/c3/leds 1", "/holo/board/b1/leds 2"}},
		{"/holo/board/{b2,c3}/leds", []string{"/holo/board/b2/leds 0", "/holo/board/c3/leds 0", "/holo/board/b2/leds 1", "/holo/board/c3/leds 1"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			r := newRig(t, auth.RoleViewer, nil)
			p := r.udp(t)
			if got := p.call("/holo/subscribe", tc.pattern); got.Status != StatusOK {
				t.Fatalf("subscribe: %+v", got)
			}
			w := r.fleet.nextWatch(t)
			w.emit(state("b1", "leds", `0`), state("b2", "leds", `0`), state("c3", "leds", `0`),
				state("b1", "screen", `1`), state("b2", "leds", `1`), state("c3", "leds", `1`),
				state("b1", "leds", `2`),
				state("zz", "leds", `9`), // a board the fleet does not know
				state("b1", "end", `"end"`))
			var got []string
			for _, m := range p.collect(len(tc.want)) {
				got = append(got, m.Address+" "+m.Args[0].(string))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("feedback\n%q\nwant\n%q", got, tc.want)
			}
			if v := testutil.ToFloat64(r.s.m.subscribers); v != 1 {
				t.Errorf("subscribers %v", v)
			}

			// Unsubscribed: the watch ends and no feedback follows.
			if got := p.call("/holo/unsubscribe"); got.Status != StatusOK {
				t.Fatalf("unsubscribe: %+v", got)
			}
			w.ended(t)
			if v := testutil.ToFloat64(r.s.m.subscribers); v != 0 {
				t.Errorf("subscribers after unsubscribe %v", v)
			}
		})
	}
}

// TestFeedbackKinds: online, offline, happenings and restarts as feedback.
func TestFeedbackKinds(t *testing.T) {
	r := newRig(t, auth.RoleViewer, nil)
	p := r.udp(t)
	p.call("/holo/subscribe", "/holo/board/b1")
	w := r.fleet.nextWatch(t)
	w.emit(fleet.Event{Board: "b1", Type: fleet.EventOffline, Reason: "no reply"},
		fleet.Event{Board: "b1", Type: fleet.EventOnline},
		fleet.Event{Board: "b1", Type: fleet.EventRestarted},
		fleet.Event{Board: "b1", Type: fleet.EventHappening, Kind: "button", Data: json.RawMessage(`{"n":1}`)})
	ms := p.collect(4)
	want := []*Message{
		{Address: "/holo/board/b1/online", Args: []any{int32(0), "no reply"}},
		{Address: "/holo/board/b1/online", Args: []any{int32(1)}},
		{Address: "/holo/board/b1/restarted"},
		{Address: "/holo/board/b1/event/button", Args: []any{`{"n":1}`}},
	}
	for i := range want {
		if ms[i].Address != want[i].Address || !reflect.DeepEqual(ms[i].Args, want[i].Args) && len(want[i].Args) > 0 {
			t.Errorf("feedback %d: %s %v, want %s %v", i, ms[i].Address, ms[i].Args, want[i].Address, want[i].Args)
		}
	}
}

func TestThumpTimeout(t *testing.T) {
	const timeout = 30 * time.Second
	r := newRig(t, auth.RoleViewer, func(o *Options) { o.ThumpTimeout = timeout })
	p := r.udp(t)
	p.call("/holo/subscribe", "/holo/all")
	w := r.fleet.nextWatch(t)

	// Thumps keep it: three times just before the timeout.
	for i := range 3 {
		r.clk.Advance(timeout - time.Second)
		if got := p.call("/holo/thump"); got.Status != StatusOK {
			t.Fatalf("thump: %+v", got)
		}
		w.emit(state("b1", "leds", "1"))
		if m := p.collect(1)[0]; m.Address != "/holo/board/b1/leds" {
			t.Fatalf("thump %d: feedback %s", i, m.Address)
		}
	}
	select {
	case <-w.ctx.Done():
		t.Fatal("the subscription ended although thumped")
	default:
	}
	// Subscribing again keeps it too.
	r.clk.Advance(timeout - time.Second)
	p.call("/holo/subscribe", "/holo/all")
	r.clk.Advance(timeout - time.Second)
	select {
	case <-w.ctx.Done():
		t.Fatal("the subscription ended although subscribed again")
	default:
	}

	// Silence for the timeout ends it.
	r.clk.Advance(time.Second)
	w.ended(t)
	deadline := time.Now().Add(wait)
	for testutil.ToFloat64(r.s.m.subscribers) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the unsubscribe runs just after the cancel
	}
	if v := testutil.ToFloat64(r.s.m.subscribers); v != 0 {
		t.Errorf("subscribers %v", v)
	}
	// A thump after the end does not bring it back; a new subscribe does.
	p.call("/holo/thump")
	p.call("/holo/subscribe", "/holo/all")
	w2 := r.fleet.nextWatch(t)
	w2.emit(state("b2", "leds", "2"))
	if m := p.collect(1)[0]; m.Address != "/holo/board/b2/leds" {
		t.Fatalf("feedback %s", m.Address)
	}
}

// tcpPeer is an OSC client over TCP with size-prefix framing.
type tcpPeer struct {
	t    *testing.T
	conn net.Conn
}

func (r *rig) tcp(t *testing.T) *tcpPeer {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.s.Addr(), wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &tcpPeer{t: t, conn: c}
}

func (p *tcpPeer) send(addr string, args ...any) {
	p.t.Helper()
	b, err := Encode(&Message{Address: addr, Args: args})
	if err != nil {
		p.t.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	if _, err := p.conn.Write(append(frame, b...)); err != nil {
		p.t.Fatal(err)
	}
}

// next reads one size-prefixed packet (framing checked by hand).
func (p *tcpPeer) next() *Message {
	p.t.Helper()
	_ = p.conn.SetReadDeadline(time.Now().Add(wait))
	var size [4]byte
	if _, err := io.ReadFull(p.conn, size[:]); err != nil {
		p.t.Fatal(err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n == 0 || n%4 != 0 || n > MaxPacket {
		p.t.Fatalf("frame size %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.conn, b); err != nil {
		p.t.Fatal(err)
	}
	pk, err := Decode(b)
	if err != nil {
		p.t.Fatal(err)
	}
	return pk.(*Message)
}

func TestTCPSizeFraming(t *testing.T) {
	r := newRig(t, auth.RoleOperator, nil)
	p := r.tcp(t)
	p.send("/holo/board/b2/screen/colour", "blue")
	m := p.next()
	if m.Address != "/reply/holo/board/b2/screen/colour" {
		t.Fatalf("reply %s", m.Address)
	}
	if rep := parseReply(t, m); rep.Status != StatusOK {
		t.Fatalf("reply %+v", rep)
	}
	calls := r.fleet.takeCalls()
	if len(calls) != 1 || calls[0].Action.Kind != fleet.ActionScreenShow || !reflect.DeepEqual(calls[0].Sel.Boards, []string{"b2"}) {
		t.Fatalf("fleet got %+v", calls)
	}
	// Two packets in one write, then a subscription's feedback on the
	// same connection.
	b1, _ := Encode(&Message{Address: "/holo/thump"})
	b2, _ := Encode(&Message{Address: "/holo/subscribe", Args: []any{"/holo/board/b2"}})
	both := AppendFrame(AppendFrame(nil, FramingSize, b1), FramingSize, b2)
	if _, err := p.conn.Write(both); err != nil {
		t.Fatal(err)
	}
	if m := p.next(); m.Address != "/reply/holo/thump" {
		t.Fatalf("got %s", m.Address)
	}
	if m := p.next(); m.Address != "/reply/holo/subscribe" || parseReply(t, m).Status != StatusOK {
		t.Fatalf("got %s %v", m.Address, m.Args)
	}
	w := r.fleet.nextWatch(t)
	w.emit(state("b2", "screen", `{"colour":"blue"}`))
	if m := p.next(); m.Address != "/holo/board/b2/screen" || m.Args[0] != `{"colour":"blue"}` {
		t.Fatalf("feedback %s %v", m.Address, m.Args)
	}
	// Closing the connection ends the subscription.
	p.conn.Close()
	w.ended(t)
}

// TestSlowSubscriberDropped: a TCP subscriber that reads nothing fills
// its socket, then its queue, and is dropped.
func TestSlowSubscriberDropped(t *testing.T) {
	r := newRig(t, auth.RoleViewer, func(o *Options) { o.Queue = 4 })
	p := r.tcp(t)
	p.send("/holo/subscribe", "/holo/all")
	if m := p.next(); parseReply(t, m).Status != StatusOK {
		t.Fatalf("subscribe: %v", m.Args)
	}
	w := r.fleet.nextWatch(t)
	big := json.RawMessage(`"` + strings.Repeat("x", 60000) + `"`)
	ended := false
	for range 4000 { // 240 MB, far more than any socket buffer
		select {
		case <-w.ctx.Done():
			ended = true
		case w.ch <- fleet.Event{Board: "b1", Type: fleet.EventState, Kind: "leds", Data: big}:
		}
		if ended {
			break
		}
	}
	w.ended(t)
	if v := testutil.ToFloat64(r.s.m.dropped); v != 1 {
		t.Errorf("holo_osc_subscribers_dropped_total %v", v)
	}
	deadline := time.Now().Add(wait)
	for testutil.ToFloat64(r.s.m.subscribers) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if v := testutil.ToFloat64(r.s.m.subscribers); v != 0 {
		t.Errorf("holo_osc_subscribers %v", v)
	}
	want := `
# HELP holo_osc_subscribers_dropped_total OSC subscribers dropped for not keeping up with their feedback.
# TYPE holo_osc_subscribers_dropped_total counter
holo_osc_subscribers_dropped_total 1
`
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(want), "holo_osc_subscribers_dropped_total"); err != nil {
		t.Error(err)
	}
}

func TestMessageMetrics(t *testing.T) {
	type count struct{ class, outcome string }
	for _, tc := range []struct {
		role auth.Role
		send func(p *udpPeer)
		want map[count]float64
	}{
		{auth.RoleOperator, func(p *udpPeer) {
			p.call("/holo/board/b1/scene", "intro")
			p.call("/holo/group/1/scene", int32(2))
			p.call("/holo/board/b1/scene")                    // no argument
			p.call("/holo/board/nothing*/leds/colour", "red") // matches no board
			p.call("/holo/all/screen/off")
			p.call("/holo/all/holo/center")
			p.call("/holo/board/b1/leds/mode", "rainbow")
			p.call("/nowhere", int32(1))
			p.call("/holo/board/b1/dance")
			p.call("/holo/replyPort", "x")
			p.call("/holo/subscribe", "/elsewhere")
			p.call("/holo/subscribe", "/holo/all")
			p.sendRaw([]byte("not osc"))
			p.sendRaw([]byte{'/', 'a', 0, 0, ',', 'i', 0, 0, 1}) // truncated
			p.call("/holo/thump")
		}, map[count]float64{
			{ClassScene, StatusOK}: 2, {ClassScene, StatusError}: 1,
			{ClassLEDs, StatusOK}: 1, {ClassLEDs, StatusError}: 1,
			{ClassScreen, StatusOK}: 1, {ClassHolo, StatusOK}: 1,
			{ClassUnknown, StatusError}: 2,
			{ClassSession, StatusError}: 1, {ClassSession, StatusOK}: 1,
			{ClassSubscribe, StatusError}: 1, {ClassSubscribe, StatusOK}: 1,
			{ClassMalformed, StatusError}: 2,
		}},
		{auth.RoleViewer, func(p *udpPeer) {
			p.call("/holo/board/b1/scene", "intro")
			p.call("/holo/all/leds/off")
			p.call("/holo/all/leds/off")
			p.call("/holo/subscribe", "/holo/all")
		}, map[count]float64{
			{ClassScene, StatusDenied}: 1, {ClassLEDs, StatusDenied}: 2, {ClassSubscribe, StatusOK}: 1,
		}},
		{auth.RoleNone, func(p *udpPeer) {
			p.call("/holo/subscribe", "/holo/all")
			p.call("/holo/board/b2/screen/show", "/a.png")
		}, map[count]float64{
			{ClassSubscribe, StatusDenied}: 1, {ClassScreen, StatusDenied}: 1,
		}},
	} {
		t.Run(tc.role.String(), func(t *testing.T) {
			r := newRig(t, tc.role, nil)
			tc.send(r.udp(t))
			for _, c := range Classes {
				for _, o := range []string{StatusOK, StatusError, StatusDenied} {
					got := testutil.ToFloat64(r.s.m.messages.WithLabelValues(c, o))
					if want := tc.want[count{c, o}]; got != want {
						t.Errorf("holo_osc_messages_total{class=%q,outcome=%q} = %v, want %v", c, o, got, want)
					}
				}
			}
			if n := testutil.CollectAndCount(r.reg, "holo_osc_messages_total"); n != len(Classes)*3 {
				t.Errorf("%d series registered, want every class and outcome", n)
			}
		})
	}
}

// TestAddressSpace: each show address of docs/osc.md reaches the fleet as
// the right selector, kind and body; bad ones reach nothing.
func TestAddressSpace(t *testing.T) {
	r := newRig(t, auth.RoleOperator, nil)
	p := r.udp(t)
	board := func(ids ...string) fleet.Selector { return fleet.Selector{Boards: ids} }
	groups := func(gs ...int) fleet.Selector { return fleet.Selector{Groups: gs} }
	all := fleet.Selector{All: true}
	for _, tc := range []struct {
		addr string
		args []any
		sel  fleet.Selector
		kind string
		body string
	}{
		{"/holo/board/b1/scene", []any{"intro"}, board("b1"), fleet.ActionSceneApply, `{"name":"intro"}`},
		{"/holo/group/1/scene", []any{int32(7)}, groups(1), fleet.ActionSceneApply, `{"slot":7}`},
		{"/holo/all/scene", []any{"finale"}, all, fleet.ActionSceneApply, `{"name":"finale"}`},
		{"/holo/board/c3/scene/end", nil, board("c3"), fleet.ActionSceneEnd, `{}`},
		{"/holo/group/[12]/scene/end", nil, groups(1, 2), fleet.ActionSceneEnd, `{}`},
		{"/holo/group/3/leds", []any{`{"mode":"pulse","colour":"red"}`}, groups(3), fleet.ActionLEDs, `{"mode":"pulse","colour":"red"}`},
		{"/holo/board/b*/leds/colour", []any{"#ff0000"}, board("b1", "b2"), fleet.ActionLEDs, `{"colour":"#ff0000"}`},
		{"/holo/board/b2/leds/color", []any{"0,0,255"}, board("b2"), fleet.ActionLEDs, `{"colour":"0,0,255"}`},
		{"/holo/all/leds/brightness", []any{int32(40)}, all, fleet.ActionLEDs, `{"brightness":40}`},
		{"/holo/all/leds/brightness", []any{float32(0.5)}, all, fleet.ActionLEDs, `{"brightness":50}`},
		{"/holo/all/leds/brightness", []any{float32(0.001)}, all, fleet.ActionLEDs, `{"brightness":1}`},
		{"/holo/group/2/leds/mode", []any{"rainbow"}, groups(2), fleet.ActionLEDs, `{"mode":"rainbow"}`},
		{"/holo/group/2/leds/off", nil, groups(2), fleet.ActionLEDs, `{"mode":"off"}`},
		{"/holo/board/b1/screen/colour", []any{"white"}, board("b1"), fleet.ActionScreenShow, `{"colour":"white"}`},
		{"/holo/group/*/screen/color", []any{"#000000"}, groups(1, 2, 3), fleet.ActionScreenShow, `{"colour":"#000000"}`},
		{"/holo/board/{b2,c3}/screen/show", []any{"/media/logo.png"}, board("b2", "c3"), fleet.ActionScreenShow, `{"path":"/media/logo.png"}`},
		{"/holo/all/screen/off", nil, all, fleet.ActionScreenOff, `{}`},
		{"/holo/board/c3/holo/motion", []any{`{"motion":"spin","speed":2}`}, board("c3"), fleet.ActionHolo, `{"motion":"spin","speed":2}`},
		{"/holo/board/c3/holo/center", nil, board("c3"), fleet.ActionHolo, `{"motion":"center"}`},
		{"/holo/group/1/holo/centre", nil, groups(1), fleet.ActionHolo, `{"motion":"center"}`},
	} {
		rep := p.call(tc.addr, tc.args...)
		if rep.Status != StatusOK || rep.Address != tc.addr {
			t.Errorf("%s %v: reply %+v", tc.addr, tc.args, rep)
		}
		calls := r.fleet.takeCalls()
		if len(calls) != 1 {
			t.Errorf("%s %v: %d fleet actions", tc.addr, tc.args, len(calls))
			continue
		}
		c := calls[0]
		if !reflect.DeepEqual(c.Sel, tc.sel) || c.Action.Kind != tc.kind || !sameJSON(c.Action.Body, tc.body) {
			t.Errorf("%s %v: fleet got %+v %s %s, want %+v %s %s", tc.addr, tc.args, c.Sel, c.Action.Kind, c.Action.Body, tc.sel, tc.kind, tc.body)
		}
	}

	for _, tc := range []struct {
		addr string
		args []any
	}{
		{"/holo/board/b1/scene", nil},
		{"/holo/board/b1/scene", []any{float32(1)}},
		{"/holo/board/b1/scene", []any{"a", "b"}},
		{"/holo/board/b1/scene/end", []any{int32(1)}},
		{"/holo/board/b1/screen/off", []any{"now"}},
		{"/holo/board/b1/screen/show", []any{int32(3)}},
		{"/holo/board/b1/screen/colour", nil},
		{"/holo/board/b1/leds/brightness", []any{float32(1.5)}},
		{"/holo/board/b1/holo/center", []any{int32(1)}},
		{"/holo/board/zz*/scene", []any{"intro"}},
		{"/holo/group/x/scene", []any{"intro"}},
		{"/holo/group/[89]/scene", []any{"intro"}},
		{"/holo/board/b1/scenes", []any{"intro"}},
		{"/holo/board/b1", []any{"intro"}},
		{"/holo/all", nil},
		{"/holo/b1/scene", []any{"intro"}},
	} {
		rep := p.call(tc.addr, tc.args...)
		if rep.Status != StatusError {
			t.Errorf("%s %v: reply %+v, want error", tc.addr, tc.args, rep)
		}
		if calls := r.fleet.takeCalls(); len(calls) != 0 {
			t.Errorf("%s %v: reached the fleet: %+v", tc.addr, tc.args, calls)
		}
	}
}

func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestAccessNoneDeniesEverything: under --osc-access none every request,
// session settings and bad requests included, is answered denied, changes
// nothing and is recorded as a refusal.
func TestAccessNoneDeniesEverything(t *testing.T) {
	r := newRig(t, auth.RoleNone, nil)
	p := r.udp(t)
	msgs := []struct {
		addr  string
		args  []any
		class string
	}{
		{"/holo/replyPort", []any{int32(9)}, ClassSession},   // would send replies elsewhere
		{"/holo/alwaysReply", []any{int32(0)}, ClassSession}, // would silence them
		{"/holo/thump", nil, ClassSession},
		{"/holo/unsubscribe", nil, ClassSession},
		{"/holo/subscribe", []any{"/holo/all"}, ClassSubscribe},
		{"/holo/board/b1/scene", nil, ClassScene},
		{"/holo/board/zz/leds/off", nil, ClassLEDs},
		{"/nowhere", nil, ClassUnknown},
	}
	for _, m := range msgs {
		// Replies keep coming to the source port: nothing was set.
		if rep := p.call(m.addr, m.args...); rep.Status != StatusDenied {
			t.Errorf("%s: %+v, want denied", m.addr, rep)
		}
	}
	for _, m := range msgs {
		if v := testutil.ToFloat64(r.s.m.messages.WithLabelValues(m.class, StatusDenied)); v == 0 {
			t.Errorf("%s: not counted as %s denied", m.addr, m.class)
		}
	}
	if calls := r.fleet.takeCalls(); len(calls) != 0 {
		t.Errorf("the fleet got %+v", calls)
	}
	recs := r.audit.records()
	if len(recs) != len(msgs) {
		t.Fatalf("%d records for %d refused requests: %+v", len(recs), len(msgs), recs)
	}
	for i, rec := range recs {
		if rec.Allowed || rec.Code != auth.CodePermissionDenied || rec.Operation != msgs[i].addr ||
			rec.Surface != auth.SurfaceOSC || rec.Who.Name != "osc:"+p.name() {
			t.Errorf("record %d: %+v", i, rec)
		}
	}
}

// TestLateTimerCallback: the thump timer's callback runs on its own
// goroutine, so it may run after a thump (or a new subscription) that
// came once the timer had fired. It must then leave the subscription
// alone: only a deadline that has passed, for the subscription the timer
// was set for, ends it.
func TestLateTimerCallback(t *testing.T) {
	const timeout = 30 * time.Second
	r := newRig(t, auth.RoleViewer, func(o *Options) { o.ThumpTimeout = timeout })
	c := r.s.newClient(context.Background(), "udp", "127.0.0.1:9", func([]byte) error { return nil })
	defer c.stop()
	c.subscribe(context.Background(), subscription{pattern: "/holo/all", scope: "all"})
	r.fleet.nextWatch(t)
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()

	// The timer fires at the deadline, a thump lands, then the callback.
	r.clk.Advance(timeout - time.Millisecond)
	c.thump()
	c.expire(gen)
	c.mu.Lock()
	alive := c.cancel != nil
	c.mu.Unlock()
	if !alive {
		t.Fatal("a late callback ended a subscription thumped after the timer fired")
	}
	// A callback of an ended subscription leaves the next one alone.
	c.unsubscribe("test")
	c.subscribe(context.Background(), subscription{pattern: "/holo/all", scope: "all"})
	r.fleet.nextWatch(t)
	r.clk.Advance(timeout + time.Second) // past the old deadline; the new timer fires and ends it
	r.clk.Advance(0)
	c.expire(gen) // the old subscription's late callback: a no-op either way
	// Silence past the deadline does end it.
	c.mu.Lock()
	ended := c.cancel == nil || !r.clk.Now().Before(c.deadline)
	c.mu.Unlock()
	if !ended {
		t.Fatal("the subscription outlived its deadline")
	}
}

// TestBundleTimed: a bundle timed in the future hands its show actions
// to the fleet at once as one timed fire for the bundle's moment (not a
// wait on the gateway's clock); its session messages run at the moment;
// a bundle in the past, or Immediately, fires now; one further ahead
// than MaxBundleLead waits until it is that close.
func TestBundleTimed(t *testing.T) {
	r := newRig(t, auth.RoleOperator, nil)
	p := r.udp(t)
	now := r.clk.Now()
	at := now.Add(5 * time.Second)
	bundle := func(tt Timetag, elems ...Packet) []byte {
		b, err := Encode(&Bundle{Time: tt, Elements: elems})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p.sendRaw(bundle(TimetagOf(at),
		&Message{Address: "/holo/group/1/leds/colour", Args: []any{"red"}},
		&Message{Address: "/holo/thump"},
		&Bundle{Time: Immediately, Elements: []Packet{&Message{Address: "/holo/board/b1/scene/end"}}},
	))
	// Both show actions reach the fleet before the moment, with it.
	reps := p.repliesTo("/holo/group/1/leds/colour", "/holo/board/b1/scene/end")
	if rep := reps["/holo/group/1/leds/colour"]; rep.Status != StatusOK {
		t.Fatalf("reply %+v", rep)
	}
	calls := r.fleet.takeCalls()
	if len(calls) != 2 {
		t.Fatalf("calls %+v", calls)
	}
	for _, c := range calls {
		if d := c.Action.At.Sub(at); d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s fired for %v, want the bundle's moment %v", c.Action.Kind, c.Action.At, at)
		}
	}
	// The session message waits for the moment.
	_ = p.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, MaxPacket)
	if n, _, err := p.conn.ReadFromUDP(buf); err == nil {
		t.Fatalf("something before the moment: %q", buf[:n])
	}
	r.clk.Set(at)
	if rep := p.replyTo("/holo/thump"); rep.Status != StatusOK {
		t.Fatalf("thump %+v", rep)
	}

	// In the past, and Immediately: now (no At).
	for _, tt := range []Timetag{TimetagOf(r.clk.Now().Add(-time.Second)), Immediately} {
		p.sendRaw(bundle(tt, &Message{Address: "/holo/all/leds/off"}))
		p.replyTo("/holo/all/leds/off")
		if calls := r.fleet.takeCalls(); len(calls) != 1 || !calls[0].Action.At.IsZero() {
			t.Fatalf("calls %+v", calls)
		}
	}

	// 45 s ahead: nothing until 30 s before, then a timed fire.
	far := r.clk.Now().Add(45 * time.Second)
	p.sendRaw(bundle(TimetagOf(far), &Message{Address: "/holo/all/screen/off"}))
	if !r.clk.WaitForWaiters(1, wait) {
		t.Fatal("no timer for a far bundle")
	}
	if calls := r.fleet.takeCalls(); len(calls) != 0 {
		t.Fatalf("a bundle 45 s ahead went to the fleet at once: %+v", calls)
	}
	r.clk.Advance(15 * time.Second)
	p.replyTo("/holo/all/screen/off")
	calls = r.fleet.takeCalls()
	if len(calls) != 1 || calls[0].Action.At.Sub(far).Abs() > time.Microsecond {
		t.Fatalf("calls %+v", calls)
	}
}
