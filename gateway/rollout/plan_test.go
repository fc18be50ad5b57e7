package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/gateway/fleet"
)

func views(n int) []fleet.BoardView {
	var out []fleet.BoardView
	for i := range n {
		out = append(out, fleet.BoardView{ID: fmt.Sprintf("b%02d", i), Online: i%5 != 4, Firmware: "1.0.0",
			Groups: []int{i%2 + 1}, Labels: map[string]string{"room": fmt.Sprint("r", i%3)}})
	}
	return out
}

func TestSelectWaves(t *testing.T) {
	cases := []struct {
		name string
		plan string
		want []int // wave sizes
		ref  int
	}{
		{"one wave", `{"target":{"all":true}}`, []int{10}, 0},
		{"canary then counts", `{"target":{"all":true},"canaries":["b03"],"waves":[{"count":2},{"count":3}]}`, []int{1, 2, 7}, 0},
		{"percent", `{"target":{"all":true},"waves":[{"percent":10},{"percent":30},{"percent":100}]}`, []int{1, 3, 6}, 0},
		{"growth", `{"target":{"all":true},"waves":[{"count":1}],"growth":2}`, []int{1, 2, 4, 3}, 0},
		{"group", `{"target":{"groups":[2]}}`, []int{5}, 0},
		{"labels", `{"target":{"labels":{"room":"r0"}}}`, []int{4}, 0},
		{"online only", `{"target":{"all":true,"online_only":true}}`, []int{8}, 2},
		{"firmware", `{"target":{"all":true,"firmware":"0.9"}}`, nil, 10},
		{"unknown board", `{"target":{"boards":["b01","zz"]}}`, []int{1}, 1},
		// b06 and b07 are on a line only (views gives them no URL) and
		// b08 on a line and the LAN: only the line-only boards are left out.
		{"line only", `{"target":{"all":true}}`, []int{8}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p Plan
			if err := json.Unmarshal([]byte(c.plan), &p); err != nil {
				t.Fatal(err)
			}
			p.Artifact = "x"
			if err := p.normalise(); err != nil {
				t.Fatal(err)
			}
			vs := views(10)
			if c.name == "line only" {
				vs[6].Line, vs[7].Line, vs[8].Line, vs[8].URL = "line0", "line0", "line0", "http://b08"
			}
			sel, err := selectBoards(&p, vs, func(string) string { return "" })
			if c.want == nil {
				if err == nil {
					t.Fatalf("selected %v", sel)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, w := range sel.Waves {
				got = append(got, len(w))
			}
			if d := cmp.Diff(got, c.want); d != "" || len(sel.Refused) != c.ref {
				t.Fatalf("waves (-got +want):\n%s refused %v", d, sel.Refused)
			}
			for _, r := range sel.Refused {
				if c.name == "line only" && (r.Board != "b06" && r.Board != "b07" || !strings.Contains(r.Reason, "reached only over line line0")) {
					t.Errorf("refused %s: %q, want b06 and b07 as line-only", r.Board, r.Reason)
				}
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	for in, want := range map[string]time.Duration{`"90s"`: 90 * time.Second, `2.5`: 2500 * time.Millisecond, `"1h2m"`: time.Hour + 2*time.Minute} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.D() != want {
			t.Errorf("%s: %v %v", in, d.D(), err)
		}
		b, _ := json.Marshal(d)
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("round trip %s: %s", in, b)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("accepted soon")
	}
}

// FuzzPlan: any plan text is refused or resolves into waves that hold
// each selected board once; nothing panics.
func FuzzPlan(f *testing.F) {
	f.Add(`{"target":{"all":true},"canaries":["b03"],"waves":[{"count":2},{"percent":30}],"growth":1.5}`)
	f.Add(`{"target":{"labels":{"room":"r1"}},"thresholds":{"success":0.9,"wave_failure":0.2,"min_sample":3,"action":"revert"}}`)
	f.Add(`{"target":{"groups":[1,40]},"window":{"start":"22:00","end":"04:00"},"soak":"1m"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var p Plan
		if json.Unmarshal([]byte(s), &p) != nil {
			return
		}
		p.Artifact = "x"
		if p.normalise() != nil {
			return
		}
		sel, err := selectBoards(&p, views(12), func(string) string { return "" })
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, w := range sel.Waves {
			if len(w) == 0 {
				t.Fatalf("empty wave in %v", sel.Waves)
			}
			for _, id := range w {
				if seen[id] {
					t.Fatalf("board %s twice: %v", id, sel.Waves)
				}
				seen[id] = true
			}
		}
	})
}

func TestWindowOpen(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 10, h, m, 0, 0, time.UTC) }
	cases := []struct {
		start, end string
		t          time.Time
		want       bool
	}{
		{"01:00", "05:00", at(0, 59), false},
		{"01:00", "05:00", at(1, 0), true},
		{"01:00", "05:00", at(4, 59), true},
		{"01:00", "05:00", at(5, 0), false},
		// Spanning midnight.
		{"22:00", "02:00", at(21, 59), false},
		{"22:00", "02:00", at(22, 0), true},
		{"22:00", "02:00", at(23, 59), true},
		{"22:00", "02:00", at(0, 0), true},
		{"22:00", "02:00", at(1, 59), true},
		{"22:00", "02:00", at(2, 0), false},
		{"22:00", "02:00", at(12, 0), false},
		// Another zone: the window is in UTC.
		{"22:00", "02:00", at(23, 0).In(time.FixedZone("UTC+5", 5*3600)), true},
		{"22:00", "02:00", time.Date(2026, 3, 10, 23, 0, 0, 0, time.FixedZone("UTC+5", 5*3600)), false},
	}
	for _, c := range cases {
		w := &Window{Start: c.start, End: c.end}
		if got := w.Open(c.t); got != c.want {
			t.Errorf("%s-%s at %v: open %v, want %v", c.start, c.end, c.t, got, c.want)
		}
	}
	if !(*Window)(nil).Open(at(12, 0)) {
		t.Error("no window is not always open")
	}
}

// TestWindowOpenNext: daily windows on chosen days in a time zone
// (across midnight and a DST change), explicit intervals, and the next
// opening.
func TestWindowOpenNext(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	at := func(y int, m time.Month, d, hh, mm int) time.Time { return time.Date(y, m, d, hh, mm, 0, 0, paris) }
	night := &Window{Start: "23:00", End: "02:00", Days: []string{"sat"}, TimeZone: "Europe/Paris"}
	morning := &Window{Start: "01:00", End: "07:00", Days: []string{"mon", "tue"}, TimeZone: "Europe/Paris"}
	only := &Window{Intervals: []Interval{{From: at(2026, 3, 12, 10, 0), To: at(2026, 3, 12, 12, 0)}}}
	cases := []struct {
		name string
		w    *Window
		t    time.Time
		open bool
		next time.Time
	}{
		{"saturday night, before", night, at(2026, 3, 14, 22, 59), false, at(2026, 3, 14, 23, 0)},
		{"saturday night, in", night, at(2026, 3, 14, 23, 30), true, at(2026, 3, 14, 23, 30)},
		{"sunday after midnight belongs to saturday", night, at(2026, 3, 15, 1, 30), true, at(2026, 3, 15, 1, 30)},
		{"sunday night is not saturday", night, at(2026, 3, 15, 23, 30), false, at(2026, 3, 21, 23, 0)},
		{"monday 01:00 opens", morning, at(2026, 3, 9, 1, 0), true, at(2026, 3, 9, 1, 0)},
		{"tuesday 07:00 closed, next monday", morning, at(2026, 3, 10, 7, 0), false, at(2026, 3, 16, 1, 0)},
		{"DST: the last Sunday of March", &Window{Start: "01:00", End: "04:00", TimeZone: "Europe/Paris"}, at(2026, 3, 29, 0, 30), false, at(2026, 3, 29, 1, 0)},
		{"DST: 03:30 after the jump is inside", &Window{Start: "01:00", End: "04:00", TimeZone: "Europe/Paris"}, at(2026, 3, 29, 3, 30), true, at(2026, 3, 29, 3, 30)},
		{"interval ahead", only, at(2026, 3, 12, 9, 0), false, at(2026, 3, 12, 10, 0)},
		{"interval in", only, at(2026, 3, 12, 11, 59), true, at(2026, 3, 12, 11, 59)},
		{"interval past: never again", only, at(2026, 3, 12, 12, 0), false, time.Time{}},
		{"UTC by default", &Window{Start: "22:00", End: "02:00"}, time.Date(2026, 3, 10, 21, 0, 0, 0, time.UTC), false, time.Date(2026, 3, 10, 22, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.w.Open(c.t); got != c.open {
				t.Errorf("Open(%v) = %v", c.t, got)
			}
			if got := c.w.Next(c.t); !got.Equal(c.next) {
				t.Errorf("Next(%v) = %v, want %v", c.t, got, c.next)
			}
		})
	}
	for _, bad := range []*Window{
		{},
		{Start: "25:00", End: "01:00"},
		{Start: "01:00", End: "01:00"},
		{Start: "01:00", End: "02:00", Days: []string{"funday"}},
		{Start: "01:00", End: "02:00", TimeZone: "Mars/Olympus"},
		{Start: "01:00", End: "02:00", TimeZone: "Local"},
		{Days: []string{"mon"}, Intervals: []Interval{{From: at(2026, 1, 1, 0, 0), To: at(2026, 1, 2, 0, 0)}}},
		{Intervals: []Interval{{From: at(2026, 1, 2, 0, 0), To: at(2026, 1, 1, 0, 0)}}},
	} {
		if errs := bad.check(); len(errs) == 0 {
			t.Errorf("window %+v passes", bad)
		}
	}
}

// TestHealthCheck: health conditions outside their ranges are plan errors.
func TestHealthCheck(t *testing.T) {
	for _, h := range []*Health{
		{MinUptime: -1},
		{MinUptime: Duration(200 * time.Hour)},
		{MaxLinkErrors: 1.5},
		{MaxLinkErrors: -0.1},
		{MinHeapFree: -1},
	} {
		if len(h.check()) == 0 {
			t.Errorf("health %+v passes", h)
		}
	}
	if errs := (&Health{MinUptime: Duration(time.Minute), MaxLinkErrors: 0.5, MinHeapFree: 1}).check(); len(errs) != 0 {
		t.Errorf("good health refused: %v", errs)
	}
	if errs := (*Health)(nil).check(); len(errs) != 0 {
		t.Errorf("no health conditions: %v", errs)
	}
}

// TestRetryWait: the wait after a board's n-th transient failure doubles
// from Backoff and stops at MaxBackoff (or at Backoff when that is
// longer), without overflowing for long backoffs.
func TestRetryWait(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		n       int
		want    time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 6, 32 * time.Second},
		{time.Second, 7, MaxBackoff},
		{time.Second, 12, MaxBackoff},
		{time.Second, MaxRetries, MaxBackoff},
		{5 * time.Second, 4, 40 * time.Second},
		{5 * time.Second, 5, MaxBackoff},
		{2 * time.Minute, 1, 2 * time.Minute},
		{2 * time.Minute, 5, 2 * time.Minute},
		{MaxTimeout, MaxRetries, MaxTimeout},
	} {
		p := Plan{Backoff: Duration(tc.backoff)}
		if got := p.retryWait(tc.n); got != tc.want {
			t.Errorf("backoff %v, failure %d: wait %v, want %v", tc.backoff, tc.n, got, tc.want)
		}
	}
}
