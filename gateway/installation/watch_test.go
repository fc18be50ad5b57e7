package installation_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/gateway/installation"
)

// TestDriftSeenThenHealed: with heal off, a scene deleted by hand shows
// as drift (from the board's event stream) and stays deleted; with heal
// on, a file deleted by hand is found on the period and put back, and a
// replacement board given the labels of a dead one takes its profile.
// Every heal is in the audit log with the revision.
func TestDriftSeenThenHealed(t *testing.T) {
	aud := &memAudit{}
	r := startRig(t, 3, nil, func(o *installation.Options) {
		o.Audit = aud
		o.CheckEvery = 300 * time.Millisecond
		o.Settle = 50 * time.Millisecond
		o.HealRetry = 200 * time.Millisecond
	})
	// Boards 0 and 1 are placed; board 2 is the spare.
	for i, side := range []string{"left", "right"} {
		if _, err := r.fleet.SetLabels(r.boards[i].ID, map[string]string{"side": side}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.in.Collector())
	d := r.parse(t, desc(false, "image"))
	r.apply(t, d, "no heal")
	left, spare := r.boards[0], r.boards[2]
	drift := func(id string) installation.Drift { return r.in.Drifts()[id] }
	waitFor(t, 20*time.Second, "both placed boards seen in sync", func() bool {
		return drift(left.ID).State == installation.StateInSync && drift(r.boards[1].ID).State == installation.StateInSync
	})
	if got := testutil.ToFloat64(gauge(t, reg, "holo_gateway_installation_boards", "in_sync")); got != 2 {
		t.Errorf("boards in sync metric %v, want 2", got)
	}

	// Heal off: a scene deleted by hand is drift, reported, left alone.
	del(t, left.URL, "/scenes/scene?name=intro")
	waitFor(t, 20*time.Second, "the deleted scene reported", func() bool {
		dr := drift(left.ID)
		return dr.State == installation.StateDrifted && dr.Diff != nil && len(dr.Diff.Scenes) == 1 && dr.Diff.Scenes[0].Name == "intro"
	})
	if got := testutil.ToFloat64(gauge(t, reg, "holo_gateway_installation_boards", "drifted")); got != 1 {
		t.Errorf("drifted metric %v, want 1", got)
	}
	if len(aud.find("installation.heal")) != 0 {
		t.Fatal("healed with heal off")
	}

	// Heal on: the apply restores the scene; then a file deleted by hand
	// comes back without anyone asking.
	d = r.parse(t, strings.Replace(desc(false, "image"), "prune: false", "prune: false\nheal: true", 1))
	r.apply(t, d, "heal on")
	del(t, left.URL, "/fs/entry?path=/clips/intro.mov")
	waitFor(t, 20*time.Second, "the file healed and the heal recorded", func() bool {
		return len(aud.find("installation.heal")) > 0
	})
	if code := get(t, left.URL, "/fs/entry?path=/clips/intro.mov", nil); code != 200 {
		t.Fatalf("healed, yet the file is not there (%d)", code)
	}
	heals := aud.find("installation.heal")
	if len(heals) == 0 || heals[0].Boards[0] != left.ID || heals[0].Name != "revision 2" || heals[0].Code != "OK" {
		t.Fatalf("heal records: %+v", heals)
	}
	checkNoDanglingScene(t, left.URL)

	// The left board dies; the spare takes its labels and its profile.
	if err := r.fm.PowerOff(0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.fleet.SetLabels(spare.ID, map[string]string{"side": "left"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the spare set up as the left board", func() bool {
		if get(t, spare.URL, "/fs/entry?path=/clips/intro.mov", nil) != 200 {
			return false
		}
		return len(scenesOf(t, spare.URL)) == 2
	})
	checkNoDanglingScene(t, spare.URL)
	waitFor(t, 20*time.Second, "the dead board reported unreachable", func() bool {
		return drift(left.ID).State == installation.StateUnreachable
	})
}

// gauge finds one metric of name with the label value among a registry's.
func gauge(t *testing.T, reg *prometheus.Registry, name, label string) prometheus.Collector {
	t.Helper()
	return gatherOne{reg: reg, name: name, label: label}
}

// gatherOne is a collector of the one sample of name with label among
// reg's, for testutil.ToFloat64.
type gatherOne struct {
	reg         *prometheus.Registry
	name, label string
}

func (g gatherOne) Describe(ch chan<- *prometheus.Desc) {}

func (g gatherOne) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := g.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != g.name {
			continue
		}
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetValue() == g.label {
					ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.GaugeValue, m.GetGauge().GetValue())
				}
			}
		}
	}
}
