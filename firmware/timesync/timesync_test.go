package timesync

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
)

func TestRoute(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	c := New(clk, start)
	clk.Advance(1500 * time.Microsecond)
	h := c.Route().Handler
	five := int64(5)
	neg := int64(-1700000000000000)
	for _, tc := range []struct {
		query  string
		status int
		want   boardapi.TimeReply
	}{
		{"", 200, boardapi.TimeReply{T2: 1500, T3: 1500}},
		{"?t1=5", 200, boardapi.TimeReply{T1: &five, T2: 1500, T3: 1500}},
		{"?t1=-1700000000000000", 200, boardapi.TimeReply{T1: &neg, T2: 1500, T3: 1500}},
		{"?t1=", 400, boardapi.TimeReply{}},
		{"?t1=abc", 400, boardapi.TimeReply{}},
		{"?t1=1e3", 400, boardapi.TimeReply{}},
		{"?t1=99999999999999999999", 400, boardapi.TimeReply{}},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/time"+tc.query, nil))
		if rec.Code != tc.status {
			t.Errorf("%q: status %d, want %d: %s", tc.query, rec.Code, tc.status, rec.Body)
			continue
		}
		if tc.status != 200 {
			continue
		}
		var got boardapi.TimeReply
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(got, tc.want); d != "" {
			t.Errorf("%q (-got +want):\n%s", tc.query, d)
		}
	}
}

// TestRealClockOrder: on a running clock t3 never comes before t2, and
// both count from the origin.
func TestRealClockOrder(t *testing.T) {
	origin := time.Now().Add(-2 * time.Second)
	h := New(clock.Real, origin).Route().Handler
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/time", nil))
	var got boardapi.TimeReply
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.T1 != nil || got.T2 < 2_000_000 || got.T3 < got.T2 || got.T3 > 60_000_000 {
		t.Fatalf("reply %s", rec.Body)
	}
}
