package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/boardtest"
)

// TestClipSyncBoard drives extension clip-sync on a holo-board process
// whose crystal runs 50 ppm fast: /info lists it, PUT /time takes an
// alignment (and refuses bad ones, changing nothing), a show naming
// clip_start starts the clip there on the aligned clock (synced, its
// frame number counted from that start), bad clip_start values are
// refused before anything changes. Every reply is checked against the
// board's own openapi.json.
func TestClipSyncBoard(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "", "--clock-ppm", "50")
	if ext := b.Do("GET", "/info", nil).Map(t)["extensions"]; !strings.Contains(fmt.Sprint(ext), boardapi.ExtensionClipSync) {
		t.Fatalf("extensions %v lack clip-sync", ext)
	}
	expect(t, upload(b, "/c.mov", "", testClip(t, 6, 64, 48)), 201, "")

	// Not aligned yet: clip_start is ignored, the clip plays on the
	// board's own clock.
	r := b.Do("POST", "/screen/show?clip_start=1", `{"path":"/c.mov","loop":true}`)
	expect(t, r, 200, "")
	if cl := r.Map(t)["clip"].(map[string]any); cl["synced"] != false || cl["start_us"] != nil {
		t.Errorf("unaligned: %v", cl)
	}

	for _, tc := range []struct{ body, code string }{
		{`{}`, "bad_request"},
		{`{"epoch_us":1790000000}`, "bad_request"},
		{`{"epoch_us":1790000000000000,"uncertainty_us":-5}`, "bad_request"},
		{`{"epoch_us":1790000000000000,"extra":1}`, "bad_request"},
		{`{"epoch_us":`, "bad_json"},
	} {
		expect(t, b.Do("PUT", "/time", tc.body), 400, tc.code)
	}
	// The gateway's time now is the real clock's; the board's clock is its
	// uptime on a fast crystal: align as a gateway would from GET /time.
	var tr boardapi.TimeReply
	t1 := time.Now().UnixMicro()
	b.Do("GET", "/time?t1="+strconv.FormatInt(t1, 10), nil).JSON(t, &tr)
	t4 := time.Now().UnixMicro()
	epoch := (t1+t4)/2 - (tr.T2+tr.T3)/2
	var al boardapi.TimeAligned
	r = b.Do("PUT", "/time", fmt.Sprintf(`{"epoch_us":%d,"uncertainty_us":%d}`, epoch, (t4-t1)/2))
	expect(t, r, 200, "")
	r.JSON(t, &al)
	if al.EpochUS != epoch || al.AlignedUS != epoch+al.NowUS || al.SetUS != al.NowUS {
		t.Errorf("PUT /time: %+v", al)
	}

	// Far outside the window the board takes (MaxFireLead ahead,
	// MaxFireLate behind): a request that reaches it seconds late on a
	// loaded machine, or an alignment off by its uncertainty, does not
	// bring them inside (61 s ahead once did).
	aligned := time.Now().UnixMicro()
	for _, q := range []string{"clip_start=x", "clip_start=" + strconv.FormatInt(aligned+(10*boardapi.MaxFireLead).Microseconds(), 10),
		"clip_start=" + strconv.FormatInt(aligned-(10*boardapi.MaxFireLate).Microseconds(), 10)} {
		expect(t, b.Do("POST", "/screen/show?"+q, `{"colour":"red"}`), 400, "bad_request")
	}
	if s := b.Do("GET", "/screen", nil).Map(t); s["showing"] != "clip" {
		t.Errorf("a refused show changed the screen: %v", s)
	}

	// Started 1 s ago on the aligned clock: 30 frames are past, and the
	// player shows the frame due, not the first.
	start := time.Now().UnixMicro() - 1_000_000
	r = b.Do("POST", "/screen/show?clip_start="+strconv.FormatInt(start, 10), `{"path":"/c.mov","loop":true}`)
	expect(t, r, 200, "")
	boardtest.WaitFor(t, 10*time.Second, "the clip on its aligned timeline", func() bool {
		cl, ok := b.Do("GET", "/screen", nil).Map(t)["clip"].(map[string]any)
		return ok && cl["synced"] == true && cl["start_us"] == float64(start) && cl["frame"].(float64) >= 30 && cl["dropped"].(float64) >= 29
	})
}
