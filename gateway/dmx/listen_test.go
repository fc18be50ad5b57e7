package dmx

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/dmx/artnet"
	"github.com/holofleet/holofleet/gateway/dmx/sacn"
	"github.com/holofleet/holofleet/gateway/nettest"
	"github.com/holofleet/holofleet/gateway/timecode"
)

func runListener(t *testing.T, l *Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// TestSACNListener: data and sync packets over UDP on loopback, and
// bytes that are not E1.31 counted and ignored.
func TestSACNListener(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	l, err := ListenSACN("127.0.0.1:0", r.e, nil)
	if err != nil {
		t.Fatal(err)
	}
	runListener(t, l)
	c := nettest.DialUDP(t, l.Addr())
	if _, err := c.Write([]byte("not sacn")); err != nil {
		t.Fatal(err)
	}
	d := sacn.Data{CID: [16]byte{1}, SourceName: "console", Priority: 100, Sequence: 1, Universe: 1, Slots: slots(1, 255, 0, 255, 0)}
	pkt, _ := sacn.AppendData(nil, d)
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	if got := r.f.next(t); got.Body["colour"] != "#00ff00" {
		t.Fatalf("%+v", got)
	}
	// Preview data is not for output.
	d.Sequence, d.Options, d.Slots = 2, sacn.OptPreview, slots(1, 255, 1, 1, 1)
	pkt, _ = sacn.AppendData(nil, d)
	c.Write(pkt)
	// Synchronised: latched until the sync packet.
	c.Write(sacn.AppendSync(nil, sacn.Sync{CID: d.CID, SyncAddr: 9}))
	d.Sequence, d.Options, d.SyncAddr, d.Slots = 3, 0, 9, slots(1, 255, 0, 0, 255)
	pkt, _ = sacn.AppendData(nil, d)
	waitFor(t, func() bool { return syncSeen(r.e, "sacn:9") })
	c.Write(pkt)
	waitFor(t, func() bool { return latched(r.e, 1) })
	c.Write(sacn.AppendSync(nil, sacn.Sync{CID: d.CID, Sequence: 1, SyncAddr: 9}))
	if got := r.f.next(t); got.Body["colour"] != "#0000ff" || got.At.IsZero() {
		t.Fatalf("%+v", got)
	}
}

func syncSeen(e *Engine, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.lastSync[key].IsZero()
}

func latched(e *Engine, uni int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.latched[uni]
	return ok
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestArtNetListener: a desk's ArtPoll is answered with a reply naming
// the gateway and its universes; ArtDmx to Port-Address 0 drives
// universe 1; ArtSync releases a latched look.
func TestArtNetListener(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	l, err := ListenArtNet("127.0.0.1:0", r.e, artnet.PollReply{ShortName: "holo-gateway", LongName: "holofleet gateway test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runListener(t, l)
	c := nettest.DialUDP(t, l.Addr())
	c.Write(artnet.AppendPoll(nil, artnet.Poll{}))
	buf := make([]byte, 600)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := artnet.DecodePollReply(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	if rep.ShortName != "holo-gateway" || rep.IP.String() != "127.0.0.1" || len(rep.Ports) != 1 || rep.Ports[0] != 0 {
		t.Fatalf("%+v", rep)
	}
	// A second poll at once is not answered (no amplifier), counted once.
	c.Write(artnet.AppendPoll(nil, artnet.Poll{}))
	pkt, _ := artnet.AppendDmx(nil, artnet.Dmx{Sequence: 1, PortAddress: 0, Slots: slots(1, 255, 255, 255, 0)[:6]})
	c.Write(pkt)
	if got := r.f.next(t); got.Body["colour"] != "#ffff00" {
		t.Fatalf("%+v", got)
	}
	if n := testutil.ToFloat64(r.e.m.polls); n != 1 {
		t.Errorf("%v poll replies, want 1", n)
	}
	c.Write(artnet.AppendSync(nil))
	waitFor(t, func() bool { return syncSeen(r.e, "artnet") })
	pkt, _ = artnet.AppendDmx(nil, artnet.Dmx{Sequence: 2, PortAddress: 0, Slots: slots(1, 255, 0, 255, 255)[:6]})
	c.Write(pkt)
	waitFor(t, func() bool { return latched(r.e, 1) })
	c.Write(artnet.AppendSync(nil))
	if got := r.f.next(t); got.Body["colour"] != "#00ffff" || got.At.IsZero() {
		t.Fatalf("%+v", got)
	}
	// A new patch: the next poll reply lists its universes.
	if err := r.e.SetPatch(&Patch{Fixtures: []Fixture{{Universe: 5, Address: 1, Profile: ProfileRGB, Group: 1}}}); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(MinPollInterval)
	c.Write(artnet.AppendPoll(nil, artnet.Poll{}))
	n, err = c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := artnet.DecodePollReply(buf[:n]); err != nil || len(rep.Ports) != 1 || rep.Ports[0] != 4 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// tcSink records the timecode an Art-Net listener hands on.
type tcSink struct{ got chan timecode.Timecode }

func (s tcSink) Timecode(source string, t timecode.Timecode) error {
	if source != ProtoArtNet {
		return errors.New("not from artnet")
	}
	s.got <- t
	return nil
}

// TestArtNetTimecode: the Art-Net listener hands ArtTimeCode of the
// master stream to its sink; another stream is ignored, a broken packet
// is counted malformed, and ArtDmx still goes to the merge beside it.
func TestArtNetTimecode(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	l, err := ListenArtNet("127.0.0.1:0", r.e, artnet.PollReply{ShortName: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := tcSink{got: make(chan timecode.Timecode, 4)}
	l.Timecode = sink
	runListener(t, l)
	c := nettest.DialUDP(t, l.Addr())
	want := timecode.Timecode{Hours: 1, Minutes: 2, Seconds: 3, Frames: 24, Rate: timecode.EBU}
	other, _ := timecode.ArtTimeCode{StreamID: 3, Timecode: timecode.Timecode{Frames: 1, Rate: timecode.SMPTE}}.AppendBinary(nil)
	master, _ := timecode.ArtTimeCode{Timecode: want}.AppendBinary(nil)
	for _, b := range [][]byte{other, master[:17], master} { // in order on loopback
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case got := <-sink.got:
		if got != want {
			t.Fatalf("timecode %+v, want %+v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no timecode reached the sink")
	}
	if n := testutil.ToFloat64(r.e.m.dropped.WithLabelValues("malformed")); n != 1 {
		t.Fatalf("malformed %v, want the short packet", n)
	}
	select {
	case got := <-sink.got:
		t.Fatalf("another stream reached the sink: %+v", got)
	default:
	}
}

// TestArtNetPollReplyAddress: bound to every address, the listener
// answers an ArtPoll with the address the poller reached it at, not
// 0.0.0.0 (Art-Net 4: the reply carries the node's IP, which controllers
// list and may address).
func TestArtNetPollReplyAddress(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	l, err := ListenArtNet("0.0.0.0:0", r.e, artnet.PollReply{ShortName: "holo-gateway"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runListener(t, l)
	_, port, _ := net.SplitHostPort(l.Addr())
	c := nettest.DialUDP(t, net.JoinHostPort("127.0.0.1", port))
	c.Write(artnet.AppendPoll(nil, artnet.Poll{}))
	buf := make([]byte, 600)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := artnet.DecodePollReply(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	if rep.IP.String() != "127.0.0.1" {
		t.Fatalf("reply IP %v, want 127.0.0.1 (where the poll arrived)", rep.IP)
	}
}
