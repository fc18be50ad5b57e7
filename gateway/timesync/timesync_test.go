package timesync

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/clock"
)

// exchange makes a sample of a board whose clock is gateway + offset:
// sent at t1, up µs on the way there, in µs inside the board, down µs
// back.
func exchange(t1, offset, up, in, down int64) Sample {
	t2 := t1 + up + offset
	return Sample{T1: t1, T2: t2, T3: t2 + in, T4: t1 + up + in + down}
}

func TestMeasure(t *testing.T) {
	for _, tc := range []struct {
		name          string
		s             Sample
		offset, delay int64
		err           error
	}{
		{"symmetric", Sample{0, 5100, 5150, 250}, 5000, 200, nil},
		{"asymmetric: slow reply", Sample{0, 5100, 5150, 1050}, 4600, 1000, nil},
		{"asymmetric: slow request", Sample{0, 5900, 5950, 1050}, 5400, 1000, nil},
		{"negative offset", Sample{1_700_000_000_000_000, 2_000_100, 2_000_300, 1_700_000_000_000_400}, -1_699_999_998_000_000, 200, nil},
		{"odd sum rounds down", Sample{0, 1, 1, 0}, 1, 0, nil}, // (1 + 1)/2
		{"odd negative", Sample{0, 0, 0, 1}, -1, 1, nil},       // -1/2 floors to -1
		{"zero delay", Sample{10, 20, 20, 10}, 10, 0, nil},
		{"t4 before t1", Sample{100, 0, 0, 50}, 0, 0, ErrBadSample},
		{"t3 before t2", Sample{0, 100, 50, 200}, 0, 0, ErrBadSample},
		{"board longer than round trip", Sample{0, 0, 500, 200}, 0, 0, ErrBadSample},
		{"overflow", Sample{-1 << 63, 1<<63 - 1, 1<<63 - 1, 1<<63 - 1}, 0, 0, ErrBadSample},
	} {
		off, d, err := tc.s.Measure()
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err == nil && (off != tc.offset || d != tc.delay) {
			t.Errorf("%s: offset %d delay %d, want %d %d", tc.name, off, d, tc.offset, tc.delay)
		}
	}
}

func TestFilter(t *testing.T) {
	const truth = 250_000
	type want struct {
		offset, unc, delay int64
		samples            int
		stepped            bool
	}
	for _, tc := range []struct {
		name    string
		window  int
		samples []Sample
		want    want
	}{
		{"one symmetric sample", 0, []Sample{exchange(0, truth, 300, 50, 300)},
			want{truth, 300, 600, 1, false}},
		{"the shortest round trip wins over an asymmetric outlier", 0, []Sample{
			exchange(0, truth, 300, 50, 9_000),       // reply queued: offset off by -4350
			exchange(100_000, truth, 400, 50, 400),   // the sharpest
			exchange(200_000, truth, 8_000, 50, 500), // request queued: off by +3750
		}, want{truth, 400 + 6, 800, 3, false}}, // 107.7 ms of age at 50 ppm: 6 µs
		{"equal least delays average, spread widens", 0, []Sample{
			exchange(0, truth, 200, 10, 400),      // offset truth-100, delay 600
			exchange(1_000, truth, 400, 10, 200),  // offset truth+100, delay 600
			exchange(2_000, truth, 5000, 10, 200), // outlier, not good (delay 5200 > 2*600+1000)
		}, want{truth, 300 + 100 + 1, 600, 3, false}},
		{"a step restarts the window", 0, []Sample{
			exchange(0, truth, 300, 50, 300),
			exchange(1_000_000, truth, 300, 50, 300),
			exchange(2_000_000, -1_000_000, 500, 50, 500), // the board restarted
		}, want{-1_000_000, 500, 1000, 1, true}},
		{"the window forgets the sharp sample", 2, []Sample{
			exchange(0, truth, 10, 50, 10),
			exchange(1_000, truth, 300, 50, 300),
			exchange(2_000, truth, 200, 50, 400),
		}, want{truth - 50, 300 + 50, 600, 2, false}}, // two at 600: mean of truth and truth-100
		{"an old sharp sample loses its edge", 0, []Sample{
			exchange(0, truth, 10, 50, 10),
			exchange(60_000_000, truth, 300, 50, 300),
		}, want{truth, 10 + 3_001, 20, 2, false}}, // 60.00058 s at 50 ppm
		{"samples older than MaxAge are dropped", 0, []Sample{
			exchange(0, truth, 10, 50, 10),
			exchange(int64(DefaultMaxAge/time.Microsecond)+1_000_000, truth, 300, 50, 300),
		}, want{truth, 300, 600, 1, false}},
	} {
		f := &Filter{Window: tc.window}
		var e Estimate
		var stepped bool
		for i, s := range tc.samples {
			var st bool
			var err error
			e, st, err = f.Add(s)
			if err != nil {
				t.Fatalf("%s: sample %d: %v", tc.name, i, err)
			}
			stepped = stepped || st
		}
		got := want{e.Offset, e.Uncertainty, e.Delay, e.Samples, stepped}
		if d := cmp.Diff(got, tc.want, cmp.AllowUnexported(want{})); d != "" {
			t.Errorf("%s (-got +want):\n%s", tc.name, d)
		}
		// Whatever the case, the truth of the last board clock lies within
		// the bound.
		last := tc.samples[len(tc.samples)-1]
		o, _, _ := last.Measure()
		truthNow := truth
		if tc.want.stepped {
			truthNow = -1_000_000
		}
		if abs(e.Offset-int64(truthNow)) > e.Uncertainty {
			t.Errorf("%s: offset %d ± %d misses the truth %d (last sample %d)", tc.name, e.Offset, e.Uncertainty, truthNow, o)
		}
	}
}

func TestBadSampleChangesNothing(t *testing.T) {
	var f Filter
	before, _, _ := f.Add(exchange(0, 7, 100, 10, 100))
	after, stepped, err := f.Add(Sample{T1: 10, T2: 0, T3: 0, T4: 5})
	if !errors.Is(err, ErrBadSample) || stepped || after != before || f.Steps() != 0 {
		t.Fatalf("got %+v %v %v, want %+v unchanged", after, stepped, err, before)
	}
}

func TestStamper(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	s := NewStamper(clk)
	if s.Now() != start.UnixMicro() {
		t.Fatalf("Now %d", s.Now())
	}
	clk.Advance(1500 * time.Microsecond)
	if got := s.Now() - start.UnixMicro(); got != 1500 {
		t.Fatalf("advanced %d", got)
	}
	if got := s.Time(s.Now()); !got.Equal(start.Add(1500 * time.Microsecond)) {
		t.Fatalf("Time %v", got)
	}
}

func FuzzFilter(f *testing.F) {
	f.Add(int64(0), int64(5100), int64(5150), int64(250), int64(3))
	f.Add(int64(-1<<63), int64(1<<63-1), int64(0), int64(1<<63-1), int64(7))
	f.Add(int64(1_700_000_000_000_000), int64(100), int64(200), int64(1_700_000_000_000_400), int64(2))
	f.Fuzz(func(t *testing.T, t1, t2, t3, t4, n int64) {
		var flt Filter
		for i := range n%12 + 1 {
			// Later samples move forward on both clocks.
			s := Sample{t1 + i*1000, t2 + i*1000, t3 + i*1000, t4 + i*1000}
			if s.T1 < t1 || s.T2 < t2 || s.T3 < t3 || s.T4 < t4 {
				return // wrapped
			}
			e, _, err := flt.Add(s)
			if err != nil {
				continue
			}
			if e.Uncertainty < 0 || e.Delay < 0 || e.Samples < 1 || e.Samples > DefaultWindow {
				t.Fatalf("estimate %+v from %+v", e, s)
			}
			off, d, _ := s.Measure()
			if e.Samples == 1 && (e.Offset != off || e.Delay != d) {
				t.Fatalf("one sample %+v: estimate %+v", s, e)
			}
		}
	})
}

// TestBounds: each leg of a sample bounds the offset on its own side, so
// samples that each waited on one leg, the request in one and the reply
// in the other, together give an estimate as sharp as one quick sample,
// widened by the crystal's drift over each sample's age; without a
// usable pair it is Estimate's.
func TestBounds(t *testing.T) {
	const offset, s = 5_000_000, int64(1_000_000)
	for _, tc := range []struct {
		name      string
		samples   []Sample
		now       int64
		off, unc  int64
		sameAsEst bool
	}{
		{name: "one sample", samples: []Sample{exchange(0, offset, 20_000, 100, 200)}, now: 20_300, sameAsEst: true},
		{name: "request waited, then the reply", samples: []Sample{
			exchange(0, offset, 20_000, 100, 200),
			exchange(s, offset, 200, 100, 20_000),
		}, now: s + 20_300, off: offset, unc: 200 + 51}, // the older sample's leg aged 1 s at 50 ppm
		{name: "both legs waited", samples: []Sample{
			exchange(0, offset, 20_000, 100, 20_000),
			exchange(s, offset, 20_000, 100, 20_000),
		}, now: s + 40_100, sameAsEst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Filter
			for _, smp := range tc.samples {
				if _, _, err := f.Add(smp); err != nil {
					t.Fatal(err)
				}
			}
			e, ok := f.Bounds(tc.now)
			est, _ := f.estimateAt(tc.now)
			switch {
			case !ok:
				t.Fatal("no estimate")
			case tc.sameAsEst && e != est:
				t.Fatalf("got %+v, want Estimate's %+v", e, est)
			case !tc.sameAsEst && (abs(e.Offset-tc.off) > 51 || e.Uncertainty > tc.unc || e.Uncertainty >= est.Uncertainty):
				t.Fatalf("got %+v (Estimate %+v), want %d ± at most %d", e, est, tc.off, tc.unc)
			}
			if d := e.Offset - offset; abs(d) > e.Uncertainty {
				t.Fatalf("the truth is %d µs off the estimate %+v", d, e)
			}
		})
	}
}
