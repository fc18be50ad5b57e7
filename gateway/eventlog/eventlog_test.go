package eventlog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/holofleet/holofleet/gateway/eventlog"
)

type ev struct {
	N    uint64
	Kind string
}

func setN(e *ev, n uint64) { e.N = n }

// fill appends count events to a log of size entries.
func fill(size, count int) *eventlog.Log[ev] {
	l := eventlog.New(size, setN)
	for i := range count {
		l.Append(ev{Kind: fmt.Sprint("k", i%2)})
	}
	return l
}

// numbers reads what C already holds.
func numbers(w *eventlog.Watcher[ev]) []uint64 {
	var out []uint64
	for {
		select {
		case e, ok := <-w.C:
			if !ok {
				return out
			}
			out = append(out, e.N)
		default:
			return out
		}
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size, count int
		after       uint64
		want        []uint64
		dropped     uint64
	}{
		{"empty log, from the first", 4, 0, 0, nil, 0},
		{"empty log, live", 4, 0, eventlog.Live, nil, 0},
		{"after 0 replays event 1", 4, 3, 0, seq(1, 3), 0},
		{"after 1", 4, 3, 1, seq(2, 3), 0},
		{"after the last", 4, 3, 3, nil, 0},
		{"after a number not yet given", 4, 3, 9, nil, 0},
		{"live", 4, 3, eventlog.Live, nil, 0},
		{"wrapped, from the first kept", 4, 10, 6, seq(7, 10), 0},
		{"wrapped, asks for gone ones", 4, 10, 2, seq(7, 10), 4},
		{"wrapped, after 0", 4, 10, 0, seq(7, 10), 6},
		{"size one", 1, 5, 0, seq(5, 5), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fill(tc.size, tc.count)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := l.Watch(ctx, tc.after, 8, nil)
			if got := numbers(w); !slices.Equal(got, tc.want) {
				t.Errorf("replay = %v, want %v", got, tc.want)
			}
			if got := w.Dropped(); got != tc.dropped {
				t.Errorf("Dropped = %d, want %d", got, tc.dropped)
			}
			if _, missed := l.Stats(); missed != tc.dropped {
				t.Errorf("Stats replayMissed = %d, want %d", missed, tc.dropped)
			}
			// Then live ones, continuing the numbers.
			e := l.Append(ev{})
			if got := numbers(w); !slices.Equal(got, []uint64{e.N}) || e.N != uint64(tc.count)+1 {
				t.Errorf("after Append: got %v, want [%d]", got, tc.count+1)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	l := fill(8, 6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := l.Watch(ctx, 0, 8, func(e ev) bool { return e.Kind == "k1" })
	if got := numbers(w); !slices.Equal(got, []uint64{2, 4, 6}) {
		t.Errorf("replay = %v", got)
	}
	l.Append(ev{Kind: "k0"})
	l.Append(ev{Kind: "k1"})
	if got := numbers(w); !slices.Equal(got, []uint64{8}) {
		t.Errorf("live = %v", got)
	}
}

func TestCutOff(t *testing.T) {
	l := eventlog.New(16, setN)
	ctx, cancel := context.WithCancel(context.Background())
	w := l.Watch(ctx, eventlog.Live, 2, nil)
	for range 5 {
		l.Append(ev{})
	}
	got := numbers(w)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("got %v, want [1 2] then a close", got)
	}
	if _, ok := <-w.C; ok {
		t.Error("C still open after the watcher fell behind")
	}
	if w.Dropped() != 3 {
		t.Errorf("Dropped = %d, want 3 (events 3-5)", w.Dropped())
	}
	if d, _ := l.Stats(); d != 3 {
		t.Errorf("Stats dropped = %d, want 3", d)
	}
	// Resuming after the last one got loses nothing the log keeps.
	w2 := l.Watch(context.Background(), got[len(got)-1], 8, nil)
	if got := numbers(w2); !slices.Equal(got, seq(3, 5)) {
		t.Errorf("resume = %v, want 3-5", got)
	}
	cancel()
}

func TestCancelCloses(t *testing.T) {
	l := eventlog.New(4, setN)
	ctx, cancel := context.WithCancel(context.Background())
	w := l.Watch(ctx, eventlog.Live, 4, nil)
	cancel()
	for range w.C {
	}
	l.Append(ev{}) // no send on the closed channel
	if l.Watchers() != 0 {
		t.Errorf("Watchers = %d, want 0", l.Watchers())
	}
}

// FuzzReplay checks the promise for any size, count, after and queue:
// a watcher gets exactly the kept entries numbered after after, in
// order, then the new ones while its queue holds them, and Dropped
// counts every one it asked for and did not get.
func FuzzReplay(f *testing.F) {
	f.Add(uint8(4), uint16(10), uint16(0), uint8(3), uint8(2))
	f.Add(uint8(1), uint16(0), uint16(0), uint8(1), uint8(0))
	f.Add(uint8(16), uint16(5), uint16(5), uint8(0), uint8(9))
	f.Fuzz(func(t *testing.T, size uint8, count, after uint16, queue, more uint8) {
		l := fill(int(size), int(count))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := l.Watch(ctx, uint64(after), int(queue), nil)
		for range more {
			l.Append(ev{})
		}
		got := numbers(w)
		last := uint64(count) + uint64(more)
		// The replay asks for the entries numbered after after; every
		// entry appended once the watch is open is asked for (numbers
		// start again at 1 when a gateway restarts, so a resume after a
		// bigger number still gets what comes next).
		first := uint64(after) + 1
		if uint64(after) >= uint64(count) {
			first = uint64(count) + 1
		}
		asked := last - first + 1
		for i, n := range got {
			if n < first || n > last || (i > 0 && n != got[i-1]+1) {
				t.Fatalf("got %v: not the numbers %d-%d in order", got, first, last)
			}
		}
		if uint64(len(got))+w.Dropped() != asked {
			t.Fatalf("got %d and dropped %d of %d asked for (%v)", len(got), w.Dropped(), asked, got)
		}
		if len(got) > 0 && got[len(got)-1] != last && w.Dropped() == 0 {
			t.Fatalf("stopped at %d of %d without a drop", got[len(got)-1], last)
		}
	})
}
