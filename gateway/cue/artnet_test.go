package cue

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/dmx/artnet"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timecode"
)

// noBoards is the DMX engine's fleet in the Art-Net timecode test: no
// board is patched, so it is never asked to do anything.
type noBoards struct{}

func (noBoards) Boards(fleet.Filter) []fleet.BoardView { return nil }
func (noBoards) Do(context.Context, fleet.Selector, fleet.Action) ([]fleet.Result, error) {
	return nil, nil
}

// artnetDesk is a timecode sender: a UDP socket to a real Art-Net
// listener whose ArtTimeCode goes to the rig's engine, as the gateway
// wires them (cmd/holo-gateway, artTimecode).
type artnetDesk struct {
	t    *testing.T
	rg   *rig
	conn net.Conn
}

func newArtnetDesk(t *testing.T, rg *rig) *artnetDesk {
	t.Helper()
	de, err := dmx.New(dmx.Options{Fleet: noBoards{}, Patch: &dmx.Patch{}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := dmx.ListenArtNet("127.0.0.1:0", de, artnet.PollReply{ShortName: "test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Timecode = rg.e
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = l.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	conn, err := net.Dial("udp4", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &artnetDesk{t: t, rg: rg, conn: conn}
}

// send sends one ArtTimeCode (stream 0) and waits until the list "tc"
// has taken it: UDP is not ordered with the test's fake clock otherwise.
func (d *artnetDesk) send(tc timecode.Timecode) {
	d.t.Helper()
	b, err := timecode.ArtTimeCode{Timecode: tc}.AppendBinary(nil)
	if err != nil {
		d.t.Fatal(err)
	}
	want := tc.String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := d.conn.Write(b); err != nil {
			d.t.Fatal(err)
		}
		// Resent until taken: a datagram may be lost even on loopback
		// (a full socket buffer on a loaded host); the same frame again
		// changes nothing.
		for range 200 {
			st, _ := d.rg.e.State("tc")
			if st.Timecode != nil && st.Timecode.Position == want && st.Timecode.Status == ChaseLocked {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("the engine never took %s over Art-Net", want)
		}
	}
}

// play sends frames from..to (counts at r), the clock one frame time on
// after each.
func (d *artnetDesk) play(from, to int64, r timecode.Rate) {
	d.t.Helper()
	for n := from; n <= to; n++ {
		d.send(timecode.FromCount(n, r))
		d.rg.clk.Advance(r.FrameDuration())
	}
}

// TestArtNetTimecodeChase: a desk's ArtTimeCode, sent over UDP to the
// Art-Net listener, chases a cue list at 25 and 30 fps: cues fire in
// order on the frames that pass them, a jump back chases, a dropout
// freewheels over the next cue and stops, and another stream than the
// master, or a broken packet, changes nothing.
func TestArtNetTimecodeChase(t *testing.T) {
	for _, rate := range []timecode.Rate{timecode.EBU, timecode.SMPTE} {
		t.Run(rate.String(), func(t *testing.T) {
			fps := int64(rate.FPS())
			fd := rate.FrameDuration()
			r := newRig(t, Options{Freewheel: 3}, tcList())
			desk := newArtnetDesk(t, r)

			desk.play(10, 2*fps+5, rate)
			for _, want := range []struct {
				group  int
				frames int64
			}{{1, fps - 10}, {2, 2*fps - 10}} {
				c := r.fl.next(t)
				if c.Sel.Groups[0] != want.group || !c.At.Equal(t0.Add(fd*time.Duration(want.frames))) {
					t.Fatalf("fired group %v for %v; want group %d for the frame %d frames after the first", c.Sel.Groups, c.At.Sub(t0), want.group, want.frames)
				}
			}
			r.fl.none(t)
			st, _ := r.e.State("tc")
			if st.Timecode.Source != "artnet" || st.Timecode.Rate != rate.String() || st.Standby != "3" {
				t.Fatalf("state after playing: %+v %+v", st, st.Timecode)
			}

			// Another stream, and a packet too short, are not followed.
			other, _ := timecode.ArtTimeCode{StreamID: 1, Timecode: timecode.FromCount(5, rate)}.AppendBinary(nil)
			good, _ := timecode.ArtTimeCode{Timecode: timecode.FromCount(2*fps+5, rate)}.AppendBinary(nil)
			for _, b := range [][]byte{other, good[:15]} {
				if _, err := desk.conn.Write(b); err != nil {
					t.Fatal(err)
				}
			}

			// A jump back chases: cue 1 only.
			desk.send(timecode.FromCount(fps+10, rate))
			if c := r.fl.next(t); c.Sel.Groups[0] != 1 {
				t.Fatalf("jump back fired %+v, want cue 1", c)
			}
			r.fl.none(t)
			if st, _ := r.e.State("tc"); st.Standby != "2" {
				t.Fatalf("standby after the jump back %q, want 2", st.Standby)
			}

			// Play to the frame before cue 3, then the desk stops: after
			// one and a half frame times the chase freewheels onto cue 3.
			desk.play(fps+11, 3*fps-1, rate)
			if c := r.fl.next(t); c.Sel.Groups[0] != 2 {
				t.Fatalf("cue 2 again: %+v", c)
			}
			r.fl.none(t)
			r.clk.Advance(fd / 2) // the last frame was taken one frame time ago
			c := r.fl.next(t)
			if c.Sel.Groups[0] != 3 || !c.At.Equal(r.clk.Now()) {
				t.Fatalf("freewheel fired %+v at %v, want cue 3 now (%v)", c, c.At.Sub(t0), r.clk.Now().Sub(t0))
			}
			waitState(t, r.e, "tc", func(s State) bool { return s.Timecode.Status == ChaseFreewheel })
			for i := 0; ; i++ {
				if i > 10 {
					t.Fatal("the freewheel never stopped")
				}
				var stopped bool
				waitState(t, r.e, "tc", func(s State) bool {
					stopped = s.Timecode.Status == ChaseStopped
					return stopped || r.clk.Waiters() > 0
				})
				if stopped {
					break
				}
				r.clk.Advance(fd)
			}
			r.fl.none(t)

			// The desk comes back: the chase locks again where it is.
			desk.send(timecode.FromCount(3*fps+2, rate))
			if c := r.fl.next(t); c.Sel.Groups[0] != 3 {
				t.Fatalf("chase after the dropout: %+v", c)
			}
		})
	}
}
