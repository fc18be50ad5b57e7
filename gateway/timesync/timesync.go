// Package timesync estimates the offset of a board's clock from the
// gateway's by NTP's method: repeated exchanges of four timestamps, and a
// clock filter that believes the sample with the shortest round trip.
//
// # One sample
//
// The gateway stamps t1 on its clock just before it sends GET /time and t4
// just after the reply arrived; the board's reply carries t2 (request
// taken) and t3 (reply sent) on the board's clock (boardapi.TimeReply).
// Then
//
//	offset = ((t2 - t1) + (t3 - t4)) / 2    board clock minus gateway clock
//	delay  = (t4 - t1) - (t3 - t2)          round trip outside the board
//
// Whatever the split of the round trip between the two directions, the
// true offset lies in [offset - delay/2, offset + delay/2]: the request
// cannot arrive before it was sent nor the reply before the board sent it.
// So a sample with a short delay is a sharp one, and a sample delayed on
// one leg only (an asymmetric path, a queued packet) is a wide one whose
// offset is wrong by up to half its delay, never more.
//
// # The filter
//
// A Filter keeps the last Window samples no older than MaxAge and takes
// the offset of the one with the least delay (the mean offset of all that
// share that delay). Its uncertainty is
//
//	delay/2 of that sample
//	+ the spread: the largest distance from that offset of the offsets of
//	  the good samples (delay at most twice the least, plus 1 ms), which
//	  widens the bound when the sharp samples disagree
//	+ MaxDrift times the age of that sample (a board's crystal is off by
//	  up to 50 ppm, so an old sample loses its edge).
//
// Bounds goes further: each leg of each sample bounds the offset on its
// own side (at most t2 - t1, at least t3 - t4), aged at MaxDrift, and the
// estimate is the middle of the tightest of those bounds, so two samples
// that each waited on a different leg are together as sharp as a quick
// one.
//
// Outliers (a sample that waited on the wire or in a queue) have long
// delays and are passed over. A sample whose interval does not meet the
// estimate's at all means the board's clock stepped (it restarted, and its
// monotonic clock started over): the window then starts again from it.
//
// Times are int64 microseconds. The gateway's clock is a Stamper: Unix
// microseconds at its start plus its monotonic time since, so a wall
// clock step on the gateway host does not show as a board's offset.
package timesync

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
)

// Errors of samples.
var (
	// ErrBadSample: the timestamps are out of order (t4 before t1, t3
	// before t2, a negative delay: the board's share is longer than the
	// round trip) or too far apart to compute with.
	ErrBadSample = errors.New("timesync: impossible sample")
)

// Defaults of a Filter.
const (
	DefaultWindow = 8
	DefaultMaxAge = 5 * time.Minute
	// MaxDrift is the crystal tolerance assumed of a board: 50 ppm.
	MaxDrift = 50e-6
	// goodSlack widens "good" beyond twice the least delay (µs).
	goodSlack = 1000
)

// Sample is one exchange: t1 and t4 on the gateway's clock, t2 and t3 on
// the board's, all in microseconds.
type Sample struct {
	T1, T2, T3, T4 int64
}

// sub returns a-b, or false when it overflows.
func sub(a, b int64) (int64, bool) {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		return 0, false
	}
	return d, true
}

// limit bounds the differences a sample may carry (about 146 years in
// µs), so that sums of two never overflow.
const limit = math.MaxInt64 / 4

// Measure returns the sample's offset and delay, or ErrBadSample.
func (s Sample) Measure() (offset, delay int64, err error) {
	a, ok1 := sub(s.T2, s.T1)
	b, ok2 := sub(s.T3, s.T4)
	rt, ok3 := sub(s.T4, s.T1)
	in, ok4 := sub(s.T3, s.T2)
	if !ok1 || !ok2 || !ok3 || !ok4 || abs(a) > limit || abs(b) > limit || rt > limit {
		return 0, 0, fmt.Errorf("%w: timestamps too far apart", ErrBadSample)
	}
	if rt < 0 || in < 0 || in > rt {
		return 0, 0, fmt.Errorf("%w: t1=%d t2=%d t3=%d t4=%d", ErrBadSample, s.T1, s.T2, s.T3, s.T4)
	}
	return floorHalf(a + b), rt - in, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// floorHalf is v/2 rounded down (so -3/2 is -2, as 3/2 is 1).
func floorHalf(v int64) int64 { return v >> 1 }

// Estimate is a board's clock as the filter believes it: board time =
// gateway time + Offset, give or take Uncertainty (µs).
type Estimate struct {
	Offset      int64
	Uncertainty int64
	// Delay is the least round trip in the window (µs).
	Delay int64
	// Samples is how many samples the window holds.
	Samples int
	// At is the gateway time (µs) of the newest sample.
	At int64
}

// Filter keeps a board's recent samples. The zero value uses the
// defaults. It is not safe for concurrent use.
type Filter struct {
	Window int           // samples kept (DefaultWindow when 0)
	MaxAge time.Duration // older samples are dropped (DefaultMaxAge when 0)

	s     []kept
	steps int
}

type kept struct {
	Sample
	offset, delay int64
}

// Steps counts the clock steps seen (window restarts).
func (f *Filter) Steps() int { return f.steps }

// Reset forgets every sample.
func (f *Filter) Reset() { f.s = f.s[:0] }

// Add takes a sample and returns the new estimate. An impossible sample
// (ErrBadSample) changes nothing. stepped reports that the sample
// contradicted the window, which was restarted from it.
func (f *Filter) Add(s Sample) (e Estimate, stepped bool, err error) {
	off, d, err := s.Measure()
	if err != nil {
		e, _ = f.Estimate()
		return e, false, err
	}
	window, maxAge := defaults.Positive(f.Window, DefaultWindow), defaults.Positive(f.MaxAge, DefaultMaxAge)
	// Drop samples too old, or from the future of this one (the gateway's
	// clock never goes back; a caller's would be a different clock).
	keep := f.s[:0]
	for _, k := range f.s {
		if age := s.T4 - k.T4; age >= 0 && age <= maxAge.Microseconds() {
			keep = append(keep, k)
		}
	}
	f.s = keep
	if cur, ok := f.estimateAt(s.T4); ok {
		// Intervals [offset ± delay/2] must meet when the clock is steady.
		gap := abs(off-cur.Offset) - d/2 - d%2 - cur.Uncertainty
		if gap > 0 {
			f.s = f.s[:0]
			f.steps++
			stepped = true
		}
	}
	if len(f.s) == window {
		copy(f.s, f.s[1:])
		f.s = f.s[:window-1]
	}
	f.s = append(f.s, kept{Sample: s, offset: off, delay: d})
	e, _ = f.Estimate()
	return e, stepped, nil
}

// Estimate returns the estimate from the window, false when it is empty.
func (f *Filter) Estimate() (Estimate, bool) {
	if len(f.s) == 0 {
		return Estimate{}, false
	}
	return f.estimateAt(f.s[len(f.s)-1].T4)
}

func (f *Filter) estimateAt(now int64) (Estimate, bool) {
	if len(f.s) == 0 {
		return Estimate{}, false
	}
	least := f.s[0].delay
	for _, k := range f.s[1:] {
		least = min(least, k.delay)
	}
	var sum, n int64
	newest := int64(math.MinInt64)
	for _, k := range f.s {
		if k.delay == least {
			sum += k.offset // each |offset| < limit/2, and n <= window
			n++
			newest = max(newest, k.T4)
		}
	}
	off := sum / n
	var spread int64
	good := 2*least + goodSlack
	for _, k := range f.s {
		if k.delay <= good {
			spread = max(spread, abs(k.offset-off))
		}
	}
	age := max(now-newest, 0)
	drift := int64(math.Ceil(float64(age) * (MaxDrift * 1e6) / 1e6))
	return Estimate{Offset: off, Uncertainty: (least+1)/2 + spread + drift, Delay: least,
		Samples: len(f.s), At: f.s[len(f.s)-1].T4}, true
}

// Stamper reads the gateway's clock in microseconds: the Unix time of its
// creation plus the monotonic time since.
type Stamper struct {
	clk   clock.Clock
	start time.Time
	unix  int64
}

// NewStamper starts a stamper on clk.
func NewStamper(clk clock.Clock) *Stamper {
	now := clk.Now()
	return &Stamper{clk: clk, start: now, unix: now.UnixMicro()}
}

// Now is the gateway's time in µs.
func (s *Stamper) Now() int64 { return s.unix + s.clk.Since(s.start).Microseconds() }

// Time converts a gateway time in µs back to a time.Time on the clock.
func (s *Stamper) Time(us int64) time.Time {
	return s.start.Add(time.Duration(us-s.unix) * time.Microsecond)
}

// Bounds is the estimate at gateway time now (µs) from both legs of every
// sample in the window: a sample bounds the board's offset from above by
// t2 - t1 (the request cannot arrive before it was sent) and from below
// by t3 - t4 (nor the reply before the board sent it), each widened by
// MaxDrift times the sample's age at now. The offset is the middle of
// the tightest of those bounds, the uncertainty their half-width; it is
// Estimate's at now when that is tighter (or the bounds do not meet).
//
// A sample that waited on one leg only (a loaded host: a request read
// late, a reply taken off the line late) is blurred as a whole, but its
// other leg's bound is as sharp as a quick sample's: so a board reached
// through a noisy path is known from the sharpest request leg and the
// sharpest reply leg of its recent samples, which are seldom the same
// exchange, and its estimate follows its drift as new samples come.
func (f *Filter) Bounds(now int64) (Estimate, bool) {
	e, ok := f.estimateAt(now)
	if !ok {
		return e, false
	}
	hi, lo := int64(math.MaxInt64), int64(math.MinInt64)
	for _, k := range f.s {
		age := abs(now - (k.T1 + (k.T4-k.T1)/2))
		drift := int64(math.Ceil(float64(age) * MaxDrift))
		hi = min(hi, k.T2-k.T1+drift) // |differences| < limit (Measure)
		lo = max(lo, k.T3-k.T4-drift)
	}
	if lo > hi {
		return e, true
	}
	if u := (hi - lo + 1) / 2; u < e.Uncertainty {
		e.Offset, e.Uncertainty = lo+floorHalf(hi-lo), u
	}
	return e, true
}
