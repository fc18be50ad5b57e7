package cue

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFireMetrics: every fire counts once per list; a fire whose action
// the fleet refuses also counts as failed (what HoloCueFireFailed reads).
func TestFireMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, Options{Registerer: reg}, demoList())
	if _, err := r.e.Go("demo", true); err != nil {
		t.Fatal(err)
	}
	r.fl.next(t)
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && s.Last.Cue == "1" })
	if f, x := testutil.ToFloat64(r.e.m.fires.WithLabelValues("demo")), testutil.ToFloat64(r.e.m.failed.WithLabelValues("demo")); f != 1 || x != 0 {
		t.Fatalf("after a good fire: fires %v, failed %v", f, x)
	}
	r.fl.fail = errors.New("no route to the boards") // read by the next fire's goroutine, started after this
	if _, err := r.e.Go("demo", true); err != nil {
		t.Fatal(err)
	}
	r.fl.next(t)
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && s.Last.Cue == "2" })
	if f, x := testutil.ToFloat64(r.e.m.fires.WithLabelValues("demo")), testutil.ToFloat64(r.e.m.failed.WithLabelValues("demo")); f != 2 || x != 1 {
		t.Fatalf("after a failed fire: fires %v, failed %v", f, x)
	}
	if n, err := testutil.GatherAndCount(reg, "holo_cue_fires_total", "holo_cue_fires_failed_total"); err != nil || n != 2 {
		t.Fatalf("registered series: %d %v", n, err)
	}
}
