package lan

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
)

var _ fleet.Driver = (*LAN)(nil)

// TestStreamLostReplayed: an in-process board behind a proxy; cutting the
// proxy loses the board, happenings emitted meanwhile are replayed after
// the reconnect (Last-Event-ID), and states are read again.
func TestStreamLostReplayed(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	p := newProxy(t, tb.Addr)
	l, sink := startLAN(t, Options{})
	if err := l.Add("http://"+p.Addr(), ""); err != nil {
		t.Fatal(err)
	}
	ref := "http://" + p.Addr()
	sink.Wait(t, 10*time.Second, "seen with states", func(s *recSink) bool {
		return s.SeenN[ref] == 1 && len(s.States[ref]) >= 6
	})
	if n := tb.Board.Current().Hub.Streams(); n != 1 {
		t.Fatalf("%d streams open, want 1", n)
	}
	for i := range 5 {
		tb.Emit("touch", map[string]any{"action": "down", "x": i, "y": 3})
	}
	tb.Emit("clip_ended", map[string]any{"path": "/a.mov", "finished": false})
	sink.Wait(t, 5*time.Second, "6 happenings", func(s *recSink) bool { return len(s.Hs[ref]) == 6 })

	// A state change arrives as Changed.
	rep, err := l.Call(context.Background(), ref, "PATCH", "/leds", []byte(`{"mode":"wipe","colour":"#010203"}`))
	if err != nil || rep.Status != 200 || field(rep.Body, "mode") != "wipe" {
		t.Fatalf("PATCH /leds: %+v %v", rep, err)
	}
	sink.Wait(t, 5*time.Second, "leds state", func(s *recSink) bool { return field(s.States[ref]["leds"], "mode") == "wipe" })

	p.Cut()
	sink.Wait(t, 10*time.Second, "lost", func(s *recSink) bool { return len(s.LostWhy[ref]) == 1 })
	for range 3 {
		tb.Emit("scene_ended", map[string]any{"name": "n", "then": "off", "by": "time"})
	}
	tb.Emit("touch", map[string]any{"action": "up", "x": 1, "y": 1})
	sink.Mu.Lock()
	delete(sink.States, ref)
	sink.Mu.Unlock()
	p.Restore()
	sink.Wait(t, 10*time.Second, "seen again, replayed, states re-read", func(s *recSink) bool {
		return s.SeenN[ref] == 2 && len(s.Hs[ref]) == 10 && len(s.States[ref]) >= 6
	})
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	fleettest.CheckOrder(t, sink.Hs[ref], 1, 10)
	if sink.RestartedN[ref] != 0 {
		t.Fatalf("restart reported: %v", sink.Log)
	}
	if field(sink.States[ref]["leds"], "mode") != "wipe" {
		t.Fatalf("leds re-read: %s", sink.States[ref]["leds"])
	}
	t.Logf("lost: %s", sink.LostWhy[ref][0])
}

// TestRestartSameAddress: a board stopped and started again on the same
// address and data dir is lost, then restarted and seen, and its
// happenings start again at seq 1.
func TestRestartSameAddress(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	l, sink := startLAN(t, Options{})
	ref := tb.URL
	if err := l.Add(ref+"/", ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "seen", func(s *recSink) bool { return s.SeenN[ref] == 1 && len(s.States[ref]) >= 6 })
	for range 3 {
		tb.Emit("touch", map[string]any{"action": "down", "x": 0, "y": 0})
	}
	sink.Wait(t, 5*time.Second, "3 happenings", func(s *recSink) bool { return len(s.Hs[ref]) == 3 })
	tb.Stop()
	sink.Wait(t, 10*time.Second, "lost", func(s *recSink) bool { return len(s.LostWhy[ref]) == 1 })
	tb2 := startBoard(t, tb.Dir, tb.Addr)
	tb2.Emit("clip_ended", map[string]any{"path": "/b.mov", "finished": true})
	sink.Wait(t, 10*time.Second, "restarted, seen, new happening", func(s *recSink) bool {
		return s.RestartedN[ref] == 1 && s.SeenN[ref] == 2 && len(s.Hs[ref]) == 4
	})
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if h := sink.Hs[ref][3]; h.Seq != 1 || h.Kind != "clip_ended" {
		t.Fatalf("after restart: %+v (%v)", h, sink.Log)
	}
}

// TestRestartInPlace: a board that restarts in place (its address keeps
// answering, as a simulated board's does) is reconnected at once: the
// restart is reported, the board is never reported lost, and calls keep
// working through it.
func TestRestartInPlace(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	// The restart shows as the uptime (whole seconds) going backwards: the
	// board is up a second before it is first read.
	waitUptime(t, tb.URL)
	l, sink := startLAN(t, Options{MinBackoff: 50 * time.Millisecond})
	ref := tb.URL
	if err := l.Add(ref, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "seen", func(s *recSink) bool { return s.SeenN[ref] == 1 && len(s.States[ref]) >= 6 })
	time.Sleep(100 * time.Millisecond) // the stream has served a while
	tb.Board.Restart(0)
	sink.Wait(t, 10*time.Second, "restarted and seen again", func(s *recSink) bool { return s.RestartedN[ref] == 1 && s.SeenN[ref] == 2 })
	if rep, err := l.Call(context.Background(), ref, "GET", "/info", nil); err != nil || rep.Status != 200 {
		t.Fatalf("GET /info after the restart: %+v %v", rep, err)
	}
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if len(sink.LostWhy[ref]) != 0 {
		t.Fatalf("reported lost across an in-place restart: %v", sink.LostWhy[ref])
	}
}

// TestCallsHostAndPassword: calls carry the password, the Host rule
// passes for an IP URL and a localhost URL, and the board's errors come
// back intact.
func TestCallsHostAndPassword(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	l, sink := startLAN(t, Options{})
	ctx := context.Background()
	ip := tb.URL
	local := strings.Replace(ip, "127.0.0.1", "localhost", 1)
	if err := l.Add(ip, ""); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(local, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "seen both ways", func(s *recSink) bool { return s.SeenN[ip] == 1 && s.SeenN[local] == 1 })
	if n := tb.Board.Current().Hub.Streams(); n != 2 {
		t.Fatalf("%d streams, want one per base URL", n)
	}
	rep, err := l.Call(ctx, local, "PATCH", "/screen", []byte(`{"backlight":33}`))
	if err != nil || rep.Status != 200 {
		t.Fatalf("PATCH via localhost: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, ip, "PATCH", "/web", []byte(`{"password":"s3cret"}`))
	if err != nil || rep.Status != 200 {
		t.Fatalf("set password: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, ip, "POST", "/screen/show", []byte(`{"colour":"red"}`))
	if err != nil || rep.Status != 401 || field(rep.Body, "error") != "auth_required" {
		t.Fatalf("without password: %+v %v", rep, err)
	}
	if e := rep.Err(); e == nil || !strings.Contains(e.Error(), "auth_required") {
		t.Fatalf("Reply.Err: %v", e)
	}
	if err := l.Add(ip, "s3cret"); err != nil {
		t.Fatal(err)
	}
	rep, err = l.Call(ctx, ip, "POST", "/screen/show", []byte(`{"colour":"red"}`))
	if err != nil || rep.Status != 200 {
		t.Fatalf("with password: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, ip, "POST", "/screen/show", []byte(`{"colour":"nocolour"}`))
	if err != nil || rep.Status != 400 || field(rep.Body, "error") != "bad_request" {
		t.Fatalf("bad colour: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, ip, "POST", "/scenes/end", nil)
	if err != nil || rep.Status == 415 {
		t.Fatalf("POST without body: %+v %v", rep, err)
	}
	rep, err = l.CallRaw(ctx, ip, "PUT", "/fs/file?path=/x.txt", "application/octet-stream", strings.NewReader("hello"), 5)
	if err != nil || rep.Status != 201 {
		t.Fatalf("upload: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, ip, "GET", "/fs/file?path=/x.txt", nil)
	if err != nil || rep.Status != 200 || string(rep.Body) != "hello" {
		t.Fatalf("download: %+v %v", rep, err)
	}
	if _, err := l.Call(ctx, "http://10.9.9.9", "GET", "/info", nil); !errors.Is(err, fleet.ErrUnknownBoard) {
		t.Fatalf("unknown board: %v", err)
	}
	if err := l.Add("ftp://x", ""); !errors.Is(err, ErrBadURL) {
		t.Fatalf("bad url: %v", err)
	}
	if _, err := l.Call(ctx, ip, "GET", "info", nil); !errors.Is(err, ErrBadURL) {
		t.Fatalf("bad path: %v", err)
	}
	l.Remove(local)
	sink.Wait(t, 5*time.Second, "removed board lost", func(s *recSink) bool { return len(s.LostWhy[local]) == 1 })
	if _, err := l.Call(ctx, local, "GET", "/info", nil); !errors.Is(err, fleet.ErrUnknownBoard) {
		t.Fatalf("removed board: %v", err)
	}
}

// TestUnreachable: a board that is not there is never seen, calls fail
// with fleet.ErrUnreachable, and the driver keeps retrying.
func TestUnreachable(t *testing.T) {
	l, sink := startLAN(t, Options{})
	if err := l.Add("http://127.0.0.1:1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Call(context.Background(), "http://127.0.0.1:1", "GET", "/info", nil); !errors.Is(err, fleet.ErrUnreachable) {
		t.Fatalf("call: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if len(sink.SeenN) != 0 || len(sink.LostWhy) != 0 {
		t.Fatalf("log %v", sink.Log)
	}
}

// TestHoloBoardProcess follows a real holo-board process: an upload with
// CallRaw, a clip shown, its clip_started happening through SSE.
func TestHoloBoardProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs holo-board")
	}
	clip, err := os.ReadFile("../../../shared/media/clip-240-30fps.mov")
	if err != nil {
		t.Skip("test media not found:", err)
	}
	b := boardtest.Start(t, "")
	l, sink := startLAN(t, Options{})
	if err := l.Add(b.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 20*time.Second, "seen", func(s *recSink) bool { return s.SeenN[b.URL] == 1 && len(s.States[b.URL]) >= 5 })
	ctx := context.Background()
	rep, err := l.CallRaw(ctx, b.URL, "PUT", "/fs/file?path=/clip.mov&overwrite=true", "application/octet-stream", strings.NewReader(string(clip)), int64(len(clip)))
	if err != nil || rep.Status/100 != 2 {
		t.Fatalf("upload: %+v %v", rep, err)
	}
	rep, err = l.Call(ctx, b.URL, "POST", "/screen/show", []byte(`{"path":"/clip.mov","loops":1}`))
	if err != nil || rep.Status != http.StatusOK {
		t.Fatalf("show: %+v %v", rep, err)
	}
	sink.Wait(t, 10*time.Second, "clip_started and screen state", func(s *recSink) bool {
		for _, h := range s.Hs[b.URL] {
			if h.Kind == "clip_started" && field(h.Data, "path") == "/clip.mov" {
				return field(s.States[b.URL]["screen"], "showing") == "clip"
			}
		}
		return false
	})
}

// TestReplayKept: with ReplayKept, a watcher that has seen nothing of
// the board's boot yet starts with every happening the board keeps, in
// order (a clustered gateway that starts drops those its stream has, and
// publishes those its previous run fetched over a line and never
// published: the soak's lost happenings at a line gateway's restart,
// whose LAN stream, followed from then on, ran ahead of the line's
// replay). Without it the watcher starts with what comes next.
func TestReplayKept(t *testing.T) {
	for _, replay := range []bool{true, false} {
		t.Run(fmt.Sprint("replay=", replay), func(t *testing.T) {
			tb := startBoard(t, "", "127.0.0.1:0")
			for i := range 3 {
				tb.Emit("touch", map[string]any{"action": "down", "x": i, "y": 3})
			}
			l, sink := startLAN(t, Options{ReplayKept: replay})
			ref := tb.URL
			if err := l.Add(ref+"/", ""); err != nil {
				t.Fatal(err)
			}
			sink.Wait(t, 10*time.Second, "seen with states", func(s *recSink) bool { return s.SeenN[ref] == 1 && len(s.States[ref]) >= 6 })
			tb.Emit("clip_ended", map[string]any{"path": "/a.mov", "finished": false})
			want := 1
			if replay {
				want = 4
			}
			sink.Wait(t, 5*time.Second, "the new happening", func(s *recSink) bool {
				hs := s.Hs[ref]
				return len(hs) > 0 && hs[len(hs)-1].Kind == "clip_ended"
			})
			sink.Mu.Lock()
			defer sink.Mu.Unlock()
			if len(sink.Hs[ref]) != want {
				t.Fatalf("%d happenings, want %d: %+v", len(sink.Hs[ref]), want, sink.Hs[ref])
			}
			fleettest.CheckOrder(t, sink.Hs[ref], 5-uint16(want), want)
		})
	}
}

// TestReplayRecentOnly: a replay of kept happenings (ReplayKept) leaves
// out those older than fleet.ReplayRecent by the board's uptime (t_ms): a
// board idle for a while keeps its last happenings for good, and a
// clustered gateway that starts would have put them in its stream again
// as new. Once the replay reaches a recent one, every later one passes.
func TestReplayRecentOnly(t *testing.T) {
	sink := newRecSink()
	ref := fleet.Ref{Driver: "lan", Addr: "http://b"}
	w := &watcher{l: &LAN{o: Options{ReplayKept: true}}, b: &lanBoard{ref: ref}, sink: sink, replayFloor: 50_000}
	for _, h := range []struct {
		seq, tms int
	}{{7, 1_000}, {8, 49_999}, {9, 50_000}, {10, 120_000}, {11, 2}} {
		w.dispatch("touch", fmt.Sprint(h.seq), []byte(fmt.Sprintf(`{"event":"touch","seq":%d,"t_ms":%d}`, h.seq, h.tms)))
	}
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	fleettest.CheckOrder(t, sink.Hs[ref.Addr], 9, 3)
}
