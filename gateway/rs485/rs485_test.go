package rs485

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/firmware/link/linktest"
	"github.com/holofleet/holofleet/gateway/fleet"
)

var _ fleet.Line = (*Line)(nil)

func addrs(n int) []int {
	var out []int
	for a := 1; a <= n; a++ {
		out = append(out, a)
	}
	return out
}

func TestDiscoveryCallNative(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	for _, a := range []int{2, 5, 7} {
		startBoard(t, line, a, []int{1 + a%2})
	}
	l, sink := startMaster(t, line, Options{Addresses: addrs(8), ReplyWait: 500 * time.Millisecond})
	sink.Wait(t, 20*time.Second, "three boards seen", func(s *recSink) bool { return len(s.SeenN) == 3 })
	got := []string{}
	sink.Mu.Lock()
	for a := range sink.SeenN {
		got = append(got, a)
	}
	sink.Mu.Unlock()
	slices.Sort(got)
	if d := cmp.Diff(got, []string{"2", "5", "7"}); d != "" {
		t.Fatalf("boards seen (-got +want)\n%s", d)
	}
	if d := cmp.Diff(l.Boards(), []int{2, 5, 7}); d != "" {
		t.Fatalf("Boards (-got +want)\n%s", d)
	}
	sink.Wait(t, 10*time.Second, "link and states of board 5", func(s *recSink) bool {
		return s.States["5"]["link"] != nil && s.States["5"]["leds"] != nil && s.States["5"]["screen"] != nil
	})
	sink.Mu.Lock()
	if field(sink.Infos["5"], "api") != "1" || field(sink.Infos["5"], "hostname") == "" {
		t.Errorf("info of 5: %s", sink.Infos["5"])
	}
	sink.Mu.Unlock()

	ctx := context.Background()
	rep, err := l.Call(ctx, "5", "PATCH", "/leds", []byte(`{"mode":"solid","colour":"#102030"}`))
	if err != nil || rep.Status != 200 || field(rep.Body, "colour") != "#102030" {
		t.Fatalf("PATCH /leds: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, "5", "PATCH", "/leds", []byte(`{"colour":"ultraviolet"}`))
	if err != nil || rep.Status != 400 || field(rep.Body, "error") != "bad_request" {
		t.Fatalf("bad colour: %+v %v", rep, err)
	}
	var apiErr interface{ Error() string }
	if apiErr = rep.Err(); apiErr == nil || !strings.Contains(apiErr.Error(), "colour") && !strings.Contains(apiErr.Error(), "bad") {
		t.Fatalf("Reply.Err: %v", apiErr)
	}
	if _, err := l.Call(ctx, "5", "GET", "/fs", nil); !errors.Is(err, fleet.ErrNotOverLink) {
		t.Fatalf("GET /fs: %v", err)
	}
	for _, bad := range []string{"0", "224", "x", ""} {
		if _, err := l.Call(ctx, bad, "GET", "/info", nil); !errors.Is(err, ErrBadAddress) {
			t.Fatalf("address %q: %v", bad, err)
		}
	}
	if _, err := l.Call(ctx, "5", "PATCH", "/leds", []byte(`[1]`)); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("array body: %v", err)
	}
	before := l.Stats()
	if _, err := l.Call(ctx, "4", "GET", "/info", nil); !errors.Is(err, fleet.ErrNoReply) {
		t.Fatalf("absent board: %v", err)
	}
	after := l.Stats()
	if after.Timeouts < before.Timeouts+3 || after.Retries < before.Retries+2 {
		t.Fatalf("timeouts %d->%d retries %d->%d", before.Timeouts, after.Timeouts, before.Retries, after.Retries)
	}
	hdr, body, err := l.Native(ctx, 7, &frame.PingRequest{})
	if err != nil || hdr.Status != frame.StatusOK || body.(*frame.PingReply).Protocol != 1 {
		t.Fatalf("native ping: %v %v %v", hdr, body, err)
	}
	hdr, _, err = l.Native(ctx, 7, &frame.HoloRequest{Motion: frame.MotionWag})
	if err != nil || hdr.Status != frame.StatusNotReady {
		t.Fatalf("native holo: %v %v", hdr, err)
	}
	if _, _, err := l.Native(ctx, 300, &frame.PingRequest{}); !errors.Is(err, ErrBadAddress) {
		t.Fatalf("native bad address: %v", err)
	}
	if _, _, err := l.Native(ctx, 7, &frame.SceneRequest{Slot: 0}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("native slot 0: %v", err)
	}
	waitFor(t, 20*time.Second, "6 polls", func() bool { return l.Stats().Polls >= 6 })
	st := l.Stats()
	if st.Boards != 3 || st.PollCycle == 0 || st.FramesOut == 0 || st.LinesOut == 0 || st.BytesIn == 0 || st.Polls == 0 || st.Busy == 0 {
		t.Fatalf("stats %+v", st)
	}
	// The changing call reported the new state.
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if c := field(sink.States["5"]["leds"], "colour"); c != "#102030" {
		t.Fatalf("leds state after PATCH: %s", sink.States["5"]["leds"])
	}
	if len(sink.Bad) > 0 {
		t.Fatal(sink.Bad)
	}
}

// TestConformance runs the host-link conformance table through Call and
// Native. Requests the master refuses before sending (paths the link does
// not serve, malformed lines) must be refused with the error standing for
// the board's status: fleet.ErrNotOverLink for 404, ErrBadRequest for 400.
func TestConformance(t *testing.T) {
	line := newLine(t, simline.Faults{})
	startBoard(t, line, 3, nil)
	l, sink := startMaster(t, line, Options{Addresses: []int{3}})
	sink.Wait(t, 20*time.Second, "board seen", func(s *recSink) bool { return s.SeenN["3"] > 0 })
	ctx := context.Background()
	for _, c := range linktest.Lines {
		method, rest, _ := strings.Cut(c.Line, " ")
		path, body, _ := strings.Cut(rest, " ")
		rep, err := l.Call(ctx, "3", method, path, []byte(body))
		if err != nil {
			switch {
			case errors.Is(err, fleet.ErrNotOverLink) && c.Status == 404:
			case errors.Is(err, ErrBadRequest) && c.Status == 400:
			default:
				t.Errorf("%s: %v, want status %d", c.Name, err, c.Status)
			}
			continue
		}
		if rep.Status != c.Status {
			t.Errorf("%s: status %d %s, want %d", c.Name, rep.Status, rep.Body, c.Status)
			continue
		}
		if c.Code != "" && field(rep.Body, "error") != c.Code {
			t.Errorf("%s: code %s, want %s", c.Name, rep.Body, c.Code)
		}
		if err := linktest.SubsetMatch(rep.Body, c.Fields, c.Keys); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	for _, c := range linktest.Natives {
		hdr, body, err := l.Native(ctx, 3, c.Req)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if hdr.Status != c.Status {
			t.Errorf("%s: status %v, want %v", c.Name, hdr.Status, c.Status)
			continue
		}
		if c.Check != nil {
			if err := c.Check(body); err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
		}
	}
}

// TestGroup: group frames and lines reach every member, nobody answers,
// and the members' next polls report the new state.
func TestGroup(t *testing.T) {
	line := newLine(t, simline.Faults{})
	var boards []*testBoard
	for a := 1; a <= 4; a++ {
		groups := []int{2}
		if a%2 == 1 {
			groups = []int{1, 2}
		}
		boards = append(boards, startBoard(t, line, a, groups))
	}
	l, sink := startMaster(t, line, Options{Addresses: addrs(4)})
	sink.Wait(t, 20*time.Second, "four boards with link and leds", func(s *recSink) bool {
		for a := 1; a <= 4; a++ {
			if s.States[fmt.Sprint(a)]["leds"] == nil || s.States[fmt.Sprint(a)]["link"] == nil {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	answers := listenGroupAnswers(t, line, frame.TypeLEDs, frame.TypeBacklight)
	if err := l.Group(ctx, 1, &frame.LEDsRequest{Mode: frame.LEDSolid, R: 0, G: 255, B: 0, Brightness: 20, Flags: frame.LEDNewColour}); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "odd boards green", func(s *recSink) bool {
		return field(s.States["1"]["leds"], "colour") == "#00ff00" && field(s.States["3"]["leds"], "colour") == "#00ff00"
	})
	for _, b := range boards {
		want := "off"
		if b.addr%2 == 1 {
			want = "solid"
		}
		if got := ledsMode(b); got != want {
			t.Errorf("board %d leds %s, want %s", b.addr, got, want)
		}
	}
	if err := l.GroupCall(ctx, 2, "PATCH", "/leds", []byte(`{"mode":"rainbow"}`)); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "every board rainbow", func(s *recSink) bool {
		for a := 1; a <= 4; a++ {
			if field(s.States[fmt.Sprint(a)]["leds"], "mode") != "rainbow" {
				return false
			}
		}
		return true
	})
	if err := l.Group(ctx, 0, &frame.BacklightRequest{Percent: 7}); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "every backlight 7", func(s *recSink) bool {
		for a := 1; a <= 4; a++ {
			if field(s.States[fmt.Sprint(a)]["screen"], "backlight") != "7" {
				return false
			}
		}
		return true
	})
	if a, all := answers(); len(a) != 0 || all == 0 {
		t.Errorf("boards answered group frames: %q (of %d frames and lines heard)", a, all)
	}
	if err := l.Group(ctx, 32, &frame.EndRequest{}); !errors.Is(err, ErrBadGroup) {
		t.Fatalf("group 32: %v", err)
	}
	if err := l.GroupCall(ctx, 1, "GET", "/fs", nil); !errors.Is(err, fleet.ErrNotOverLink) {
		t.Fatalf("group GET /fs: %v", err)
	}
}

// listenGroupAnswers listens on line for what can only be an answer to a
// group request, and returns what it heard so far: a reply frame with
// seq 0 (a group frame's) of one of types (sent only to groups by the
// test), or a reply line without a tag (the master tags every line it
// addresses to one board; a group line carries none). The master's own
// Stray count does not tell: a poll's reply that came after its wait on
// a loaded machine is one too. It also says how many frames and lines it
// heard in all, so that a deaf listener does not pass.
func listenGroupAnswers(t *testing.T, line *simline.Line, types ...frame.Type) func() (answers []string, all int) {
	t.Helper()
	node, err := line.Attach(simline.NodeOptions{Name: "listener", RxBuffer: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	rx := stream.New(stream.Config{Mode: stream.Auto})
	var mu sync.Mutex
	var heard []string
	all := 0
	go func() { _ = rx.Pump(t.Context(), node) }()
	go func() {
		for {
			it, err := rx.Next(t.Context())
			if err != nil {
				return
			}
			var answer bool
			switch it.Kind {
			case stream.Frame:
				answer = len(it.Data) >= frame.HeaderLen && it.Data[1] == 0 &&
					slices.ContainsFunc(types, func(ty frame.Type) bool { return frame.Type(it.Data[2]) == ty.Reply() })
			case stream.Line:
				r, err := jsonline.ParseReply(it.Data)
				answer = jsonline.ClassifyFromBoard(it.Data) == jsonline.KindReply && err == nil && r.Tag == ""
			}
			mu.Lock()
			all++
			if answer {
				heard = append(heard, fmt.Sprintf("%x", it.Data))
			}
			mu.Unlock()
		}
	}()
	return func() ([]string, int) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(heard), all
	}
}

func ledsMode(b *testBoard) string {
	r, _ := b.Board.Current().HTTP.Lookup("GET", "/leds")
	rec := newRecorder()
	r.Handler.ServeHTTP(rec, newGet("/leds"))
	var s struct{ Mode string }
	_ = json.Unmarshal(rec.body.Bytes(), &s)
	return s.Mode
}
