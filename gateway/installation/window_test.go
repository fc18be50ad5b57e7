package installation_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// TestApplyWindow: an apply carrying a window (Tuesdays 01:00-01:30,
// Europe/Paris, and an interval from 01:31 to 02:00) over three boards,
// one at a time. Made on Tuesday at 00:30 it starts no board and says
// when the window opens; at 01:00 the first board starts; the window
// closes while that board is applying: it finishes, and the two others
// wait, the run saying until when; at 01:31 they are applied.
func TestApplyWindow(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	fake := clock.NewFake(time.Date(2026, 3, 10, 0, 59, 0, 0, paris))
	gate := make(chan struct{})
	var mu sync.Mutex
	started := map[string]bool{}
	hold := true
	r := startRig(t, 3, nil, func(o *installation.Options) {
		o.Clock = fake
		o.Step = func(board, step, what string) {
			mu.Lock()
			first := !started[board]
			started[board] = true
			h := hold && first
			hold = hold && !first
			mu.Unlock()
			if h {
				<-gate
			}
		}
	})
	r.label(t)
	d := r.parse(t, desc(false, "image")+"\n")
	d.Rollout = &installation.Strategy{MaxInFlight: 1,
		Window: &rollout.Window{Start: "01:00", End: "01:30", Days: []string{"tue"}, TimeZone: "Europe/Paris",
			Intervals: []rollout.Interval{{From: time.Date(2026, 3, 10, 1, 31, 0, 0, paris), To: time.Date(2026, 3, 10, 2, 0, 0, 0, paris)}}}}
	_, st, err := r.in.Apply(context.Background(), d, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	status := func() installation.RunStatus {
		st, err := r.in.RunStatus(st.ID)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitFor(t, 10*time.Second, "the run to say when the window opens", func() bool {
		return status().Reason == "outside the window; it next opens 2026-03-10 01:00 CET"
	})
	if st := status(); st.Phases[installation.PhasePending] != 3 {
		t.Fatalf("before the window: %+v", st.Phases)
	}
	mu.Lock()
	n := len(started)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d boards started before the window opened", n)
	}

	fake.Set(time.Date(2026, 3, 10, 1, 0, 0, 0, paris))
	// From here the fake time runs at ten times real time, so the
	// apply's own waits (a busy board's retry) go by; the window's edges
	// are set, not run into.
	defer fake.Run(50 * time.Millisecond)()
	waitFor(t, 20*time.Second, "a board started in the window", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started) == 1
	})
	// The window closes while that board is applying: it finishes, no
	// other starts.
	fake.Set(time.Date(2026, 3, 10, 1, 30, 0, 0, paris))
	close(gate)
	waitFor(t, 20*time.Second, "the first board in sync and the others held", func() bool {
		st := status()
		return st.Phases[installation.PhaseInSync] == 1 && st.Reason == "outside the window; it next opens 2026-03-10 01:31 CET"
	})
	if st := status(); st.Phases[installation.PhasePending] != 2 || st.Finished {
		t.Fatalf("after the window closed: %+v", st)
	}
	mu.Lock()
	n = len(started)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d boards started, only the one in flight when the window closed should have", n)
	}

	// The window's next opening (an explicit interval), the rest.
	fake.Set(time.Date(2026, 3, 10, 1, 31, 0, 0, paris))
	st = r.waitRun(t, st.ID)
	if st.State != installation.RunDone || st.Phases[installation.PhaseInSync] != 3 || strings.HasPrefix(st.Reason, "outside") {
		t.Fatalf("the run once the window reopened: %+v", st)
	}
}

// TestParseWindow: a description's rollout.window is the rollouts'
// window, checked as such with the path of the problem.
func TestParseWindow(t *testing.T) {
	good := "version: 1\nprofiles:\n  p: {}\nassignments:\n  - {profile: p, group: 1}\n" +
		"rollout:\n  window:\n    start: \"01:00\"\n    end: \"07:00\"\n    days: [mon, tue]\n    time_zone: Europe/Paris\n" +
		"    intervals:\n      - {from: \"2026-03-14T22:00:00Z\", to: \"2026-03-15T02:00:00Z\"}\n"
	d, err := installation.Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	w := d.Rollout.Window
	if w == nil || w.Start != "01:00" || w.TimeZone != "Europe/Paris" || len(w.Days) != 2 || len(w.Intervals) != 1 ||
		!w.Intervals[0].From.Equal(time.Date(2026, 3, 14, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("window %+v", w)
	}
	// The stored revision's JSON reads back the same.
	back, err := installation.FromJSON("rev", d.JSON())
	if err != nil || back.Rollout.Window.Intervals[0].To != w.Intervals[0].To || back.Rollout.Window.End != "07:00" {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	for in, want := range map[string]string{
		"start: \"25:00\"\n    end: \"07:00\"":                              `window time "25:00" is not HH:MM`,
		"start: \"01:00\"\n    end: \"07:00\"\n    days: [someday]":         `window day "someday"`,
		"start: \"01:00\"\n    end: \"07:00\"\n    time_zone: Mars/Olympus": `time zone "Mars/Olympus"`,
		"strict: true": "give start and end, or intervals",
	} {
		text := "version: 1\nprofiles:\n  p: {}\nassignments:\n  - {profile: p, group: 1}\nrollout:\n  window:\n    " + in + "\n"
		_, err := installation.Parse("bad.yaml", []byte(text))
		var perr *installation.ParseError
		if !errors.As(err, &perr) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bad.yaml:8:") {
			t.Errorf("%q: %v, want %q at bad.yaml:8 (the window)", in, err, want)
		}
	}
}
