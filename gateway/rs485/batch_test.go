package rs485

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
)

// writeLog is a port that keeps each write.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
}

func (w *writeLog) Read([]byte) (int, error) { select {} }

func (w *writeLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, bytes.Clone(b))
	return len(b), nil
}

// framesOf splits one write into the frames it carries.
func framesOf(t *testing.T, b []byte) []frame.Frame {
	t.Helper()
	var out []frame.Frame
	for _, part := range bytes.Split(b, []byte{frame.Delimiter}) {
		if len(part) == 0 {
			continue
		}
		f, _, err := frame.Decode(nil, part)
		if err != nil {
			t.Fatalf("a frame that does not decode: %v", err)
		}
		out = append(out, f)
	}
	return out
}

// TestGroupFramesBackToBack: group frames queued while the line was busy
// (a desk's look for four group fixtures) go out in one write, back to
// back in the order they came, ahead of a command queued between them;
// a frame that would run into a timed send stays queued; a frame whose
// caller gave up is dropped.
func TestGroupFramesBackToBack(t *testing.T) {
	leds := func(r uint8) frame.Request {
		return &frame.LEDsRequest{Mode: frame.LEDSolid, R: r, Brightness: 50, Flags: frame.LEDNewColour}
	}
	groupJob := func(ctx context.Context, g int, at time.Time) *job {
		j := &job{ctx: ctx, kind: jobGroup, addr: frame.GroupAddress(g), req: leds(uint8(g)), done: make(chan result, 1), at: at}
		if !at.IsZero() {
			j.wire, _ = frame.AppendRequest(nil, j.addr, 0, j.req)
		}
		return j
	}
	one, _ := frame.AppendRequest(nil, frame.GroupAddress(1), 0, leds(1))
	for _, tc := range []struct {
		name string
		// timedIn: a timed send starts writing that many frames' wire
		// time from now (0: none).
		timedIn float64
		want    []int // groups of the batch, in order
	}{
		{"four fixtures", 0, []int{1, 2, 3, 4}},
		{"a timed send close", 2.5, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := &writeLog{}
			clk := clock.NewFake(time.Unix(1000, 0))
			l := New(Options{Name: "batch", Port: port, Clock: clk})
			w := l.wireTime(len(one))
			l.sched = newScheduler(l)
			ctx := context.Background()
			gone, cancel := context.WithCancel(ctx)
			cancel()
			first := groupJob(ctx, 1, time.Time{})
			call := &job{ctx: ctx, kind: jobLine, addr: 5, line: jsonline.Request{Method: "GET", Path: "/leds"}, done: make(chan result, 1)}
			given := []*job{groupJob(ctx, 2, time.Time{}), call, groupJob(gone, 9, time.Time{}), groupJob(ctx, 3, time.Time{})}
			for _, j := range given {
				l.queued(j)
			}
			l.cmds <- groupJob(ctx, 4, time.Time{}) // not yet taken off the channel
			if tc.timedIn > 0 {
				l.queued(groupJob(ctx, 7, clk.Now().Add(time.Duration(tc.timedIn*float64(w))+w)))
			}
			l.groupBatch(first)
			if len(port.writes) != 1 {
				t.Fatalf("%d writes, want 1", len(port.writes))
			}
			var got []int
			for _, f := range framesOf(t, port.writes[0]) {
				got = append(got, f.Addr.Group())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("one write carried the frames of groups %v, want %v", got, tc.want)
			}
			if r := <-given[2].done; r.err == nil {
				t.Error("a frame whose caller gave up was sent")
			}
			var left []string
			for _, j := range l.sched.queue {
				left = append(left, j.addr.String())
			}
			if l.sched.queue[0] != call {
				t.Errorf("the queue left is %v, the command first", left)
			}
			if n := l.Stats().FramesOut; n != uint64(len(tc.want)) {
				t.Errorf("frames out %d, want %d", n, len(tc.want))
			}
		})
	}
}
