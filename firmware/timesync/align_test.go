package timesync

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
)

const epoch = int64(1_790_000_000_000_000) // a gateway's Unix µs

func alignReq(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPut, "/api/v1/time", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestAlignRoute: PUT /time takes a checked alignment and answers what the
// board holds; a refused body changes nothing.
func TestAlignRoute(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	a := NewAligner(New(clk, start))
	clk.Advance(2500 * time.Microsecond)
	h := a.Route().Handler
	if _, ok := a.Epoch(); ok {
		t.Fatal("aligned before any PUT")
	}
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{}`, 400, "bad_request"},
		{``, 400, "bad_json"},
		{`{"epoch_us":"1"}`, 400, "bad_request"},
		{`{"epoch_us":1790000000}`, 400, "bad_request"}, // seconds, not µs
		{`{"epoch_us":9000000000000000}`, 400, "bad_request"},
		{`{"epoch_us":1790000000000000,"uncertainty_us":-1}`, 400, "bad_request"},
		{`{"epoch_us":1790000000000000,"uncertainty_us":60000001}`, 400, "bad_request"},
		{`{"epoch_us":1790000000000000,"offset":3}`, 400, "bad_request"},
		{`{"epoch_us":1790000000000000}{}`, 400, "bad_json"},
		{`[1]`, 400, "bad_request"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, alignReq(tc.body))
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.body, rec.Code, rec.Body, tc.status, tc.code)
		}
		if _, ok := a.Epoch(); ok {
			t.Fatalf("%s: refused, yet the board is aligned", tc.body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, alignReq(`{"epoch_us":1790000000000000,"uncertainty_us":120}`))
	if rec.Code != 200 {
		t.Fatalf("good alignment: %d %s", rec.Code, rec.Body)
	}
	var got boardapi.TimeAligned
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := boardapi.TimeAligned{EpochUS: epoch, UncertaintyUS: 120, SetUS: 2500, NowUS: 2500, AlignedUS: epoch + 2500}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("reply (-got +want):\n%s", d)
	}
	if e, ok := a.Epoch(); !ok || e != epoch {
		t.Errorf("Epoch() = %d, %v", e, ok)
	}
	// The latest alignment wins.
	clk.Advance(time.Second)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, alignReq(`{"epoch_us":1790000000000040}`))
	if e, _ := a.Epoch(); rec.Code != 200 || e != epoch+40 {
		t.Errorf("second alignment: %d, epoch %d", rec.Code, e)
	}
}

// FuzzAlign: any body is answered 200 or 400, never a panic, and only a
// 200 changes the alignment, to exactly what the body said.
func FuzzAlign(f *testing.F) {
	for _, s := range []string{`{"epoch_us":1790000000000000}`, `{"epoch_us":1790000000000000,"uncertainty_us":5}`,
		`{}`, `{"epoch_us":null}`, `{"epoch_us":1e20}`, `{"epoch_us":-1}`, `nul`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		clk := clock.NewFake(time.Unix(0, 0))
		a := NewAligner(New(clk, clk.Now()))
		rec := httptest.NewRecorder()
		a.Route().Handler.ServeHTTP(rec, alignReq(body))
		e, ok := a.Epoch()
		switch rec.Code {
		case 200:
			var req boardapi.TimeAlign
			if err := boardapi.DecodeBytes([]byte(body), &req, false); err != nil || req.Check() != nil {
				t.Fatalf("%q accepted: %v", body, err)
			}
			if !ok || e != *req.EpochUS {
				t.Fatalf("%q: epoch %d %v", body, e, ok)
			}
		case 400:
			if ok {
				t.Fatalf("%q refused, yet aligned", body)
			}
		default:
			t.Fatalf("%q: status %d", body, rec.Code)
		}
	})
}
