package boardtest

import (
	"image/color"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/hal"
)

// StripWatch is an LED strip that notes when the board latched each
// frame and the frame's first pixel: the moment a board's LEDs changed,
// on the process's clock, which a test's gateway shares. Put it in
// InProcOptions.Hardware with WatchedHardware.
type StripWatch struct {
	hal.LEDStrip
	clk clock.Clock

	mu     sync.Mutex
	writes []StripWrite // the last stripKeep
	next   int
	n      int
}

// StripWrite is one frame latched: when, and its first pixel.
type StripWrite struct {
	At    time.Time
	First color.RGBA
}

const stripKeep = 512

// WatchedHardware is a new simulated set of devices whose strip is
// watched.
func WatchedHardware() (*board.Hardware, *StripWatch) {
	hw := board.SimHardware(clock.Real)
	w := &StripWatch{LEDStrip: hw.Strip, clk: clock.Real, writes: make([]StripWrite, stripKeep)}
	hw.Strip = w
	return hw, w
}

// Write latches the frame on the strip and notes it.
func (s *StripWatch) Write(px []color.RGBA) error {
	at := s.clk.Now()
	if err := s.LEDStrip.Write(px); err != nil {
		return err
	}
	var first color.RGBA
	if len(px) > 0 {
		first = px[0]
	}
	s.mu.Lock()
	s.writes[s.next] = StripWrite{At: at, First: first}
	s.next = (s.next + 1) % stripKeep
	s.n++
	s.mu.Unlock()
	return nil
}

// First returns the first frame latched at or after since whose first
// pixel passes match, among the last frames kept.
func (s *StripWatch) First(since time.Time, match func(color.RGBA) bool) (StripWrite, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := min(s.n, stripKeep)
	for i := range k {
		w := s.writes[(s.next-k+i+stripKeep)%stripKeep]
		if !w.At.Before(since) && match(w.First) {
			return w, true
		}
	}
	return StripWrite{}, false
}

// Await waits up to timeout (real time) for First to find a frame.
func (s *StripWatch) Await(since time.Time, match func(color.RGBA) bool, timeout time.Duration) (StripWrite, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if w, ok := s.First(since, match); ok {
			return w, true
		}
		if time.Now().After(deadline) {
			return StripWrite{}, false
		}
		time.Sleep(200 * time.Microsecond)
	}
}
