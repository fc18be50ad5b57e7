package fire_test

import (
	"bytes"
	"encoding/json"
	"image/color"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/boardtest"
)

func do(t *testing.T, method, url string, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewReader([]byte(body))
	}
	req, _ := http.NewRequest(method, url, r)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestBoardFiresAtItsClock: a board told over HTTP to change its LEDs at
// a moment of its clock (read from GET /time) answers 202 at once and
// changes them then, by the watched strip.
func TestBoardFiresAtItsClock(t *testing.T) {
	hw, strip := boardtest.WatchedHardware()
	b := boardtest.StartInProcess(t, boardtest.InProcOptions{Hardware: hw})
	api := b.URL + "/api/v1"
	if code, body := do(t, "PATCH", api+"/leds", `{"mode":"solid","colour":"#000010","brightness":100}`); code != 200 {
		t.Fatalf("PATCH /leds: %d %s", code, body)
	}
	red := func(c color.RGBA) bool { return c.R > 0 && c.B == 0 }

	for _, base := range []time.Duration{40 * time.Millisecond, 150 * time.Millisecond} {
		// The lead is base plus four GET /time round trips, so the moment
		// is still ahead when the PATCH arrives however loaded the
		// machine; should it not be, the board makes the change at once
		// (200) and the test tries again with a longer lead.
		var (
			lead              time.Duration
			earliest, latest  time.Time
			sent              time.Time
			scheduled         bool
			code              int
			body              []byte
			fr                boardapi.FireReply
			fireAt, rttFactor = int64(0), time.Duration(4)
		)
		for try := 0; try < 5 && !scheduled; try, rttFactor = try+1, rttFactor*4 {
			before := time.Now()
			_, tb := do(t, "GET", api+"/time", "")
			var tr boardapi.TimeReply
			if err := json.Unmarshal(tb, &tr); err != nil {
				t.Fatal(err)
			}
			// The board's clock read tr.T3 between before and sent: its
			// moment T3 + lead is between before + lead and sent + lead.
			sent = time.Now()
			lead = base + rttFactor*sent.Sub(before)
			earliest, latest = before.Add(lead), sent.Add(lead)
			fireAt = tr.T3 + lead.Microseconds()
			code, body = do(t, "PATCH", api+"/leds?fire_at="+strconv.FormatInt(fireAt, 10), `{"colour":"#ff0000"}`)
			if code == http.StatusOK { // the moment had passed on arrival
				t.Logf("lead %v: the moment passed before the request arrived; again with a longer lead", lead)
				if c, b := do(t, "PATCH", api+"/leds", `{"colour":"#000010"}`); c != 200 {
					t.Fatalf("reset: %d %s", c, b)
				}
				continue
			}
			scheduled = true
		}
		if code != http.StatusAccepted || json.Unmarshal(body, &fr) != nil || !fr.Scheduled || fr.FireAt != fireAt || fr.InUS <= 0 {
			t.Fatalf("lead %v: %d %s", lead, code, body)
		}
		w, ok := strip.Await(sent, red, 30*time.Second)
		if !ok {
			t.Fatalf("lead %v: never changed", lead)
		}
		// Early is what this test is for: a board that applied at receipt
		// would be most of a lead early. How late it is depends on the
		// machine's load; the bound only catches a broken path (precise
		// timing: the scheduler's own tests on the fake clock, and the
		// benchmarks).
		if d := w.At.Sub(earliest); d < -5*time.Millisecond {
			t.Errorf("lead %v: changed %v before its moment", lead, -d)
		}
		if d := w.At.Sub(latest); d > time.Second {
			t.Errorf("lead %v: changed %v after its moment", lead, d)
		}
		if code, body := do(t, "PATCH", api+"/leds", `{"colour":"#000010"}`); code != 200 {
			t.Fatalf("reset: %d %s", code, body)
		}
	}

	// at_ms: a lead from arrival, for clients without an aligned clock.
	// Arrival is after sent, so the change comes 60 ms after sent or
	// later, never before.
	sent := time.Now()
	if code, body := do(t, "PATCH", api+"/leds?at_ms=60", `{"colour":"#ff0000"}`); code != http.StatusAccepted {
		t.Fatalf("at_ms: %d %s", code, body)
	}
	if w, ok := strip.Await(sent, red, 30*time.Second); !ok || w.At.Sub(sent) < 55*time.Millisecond {
		t.Fatalf("at_ms=60: changed %v after the request (ok %v)", w.At.Sub(sent), ok)
	}

	// Refusals: checked at once, nothing scheduled.
	for _, tc := range []struct{ method, path, body string }{
		{"PATCH", "/leds?at_ms=100", `{"colour":"ultraviolet"}`},
		{"PATCH", "/leds?at_ms=60001", `{"colour":"#ff0000"}`},
		{"PATCH", "/leds?fire_at=soon", `{"colour":"#ff0000"}`},
		{"POST", "/screen/show?at_ms=10", `{"path":"/nope.png"}`},
		{"POST", "/scenes/apply?at_ms=10", `{"name":"nope"}`},
		{"POST", "/holo/motion?at_ms=10", `{"motion":"wag"}`},
	} {
		if code, body := do(t, tc.method, api+tc.path, tc.body); code < 400 || code >= 500 {
			t.Errorf("%s %s %s: %d %s, want a refusal", tc.method, tc.path, tc.body, code, body)
		}
	}
	if st := b.Board.Current().Fire.Stats(); st.Pending != 0 || st.Scheduled != 3 || st.Applied != 3 {
		t.Errorf("scheduler %+v", st)
	}

	// Every schedulable route says so in openapi.json.
	_, ob := do(t, "GET", api+"/openapi.json", "")
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name string } `json:"parameters"`
			Responses  map[string]any          `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(ob, &doc); err != nil {
		t.Fatal(err)
	}
	for _, mp := range [][2]string{{"/leds", "patch"}, {"/screen/show", "post"}, {"/screen", "delete"},
		{"/holo/motion", "post"}, {"/scenes/apply", "post"}, {"/scenes/end", "post"}} {
		op, ok := doc.Paths["/api/v1"+mp[0]][mp[1]]
		if !ok {
			op, ok = doc.Paths[mp[0]][mp[1]]
		}
		names := map[string]bool{}
		for _, p := range op.Parameters {
			names[p.Name] = true
		}
		if _, has202 := op.Responses["202"]; !ok || !names["fire_at"] || !names["at_ms"] || !has202 {
			t.Errorf("%s %s in openapi.json: params %v, 202 %v", mp[1], mp[0], names, op.Responses["202"] != nil)
		}
	}
}
