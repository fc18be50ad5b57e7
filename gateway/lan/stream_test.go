package lan

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// TestStreamSilence: a stream that goes silent for StreamIdle is taken for
// dead and opened again at once; a board that takes the stream's request
// and never answers it has the connection closed after StreamIdle, and is
// lost with that reason. The request carries Accept and Last-Event-ID.
func TestStreamSilence(t *testing.T) {
	var streams atomic.Int32
	dropped := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/info":
			_, _ = io.WriteString(w, `{"id":"fake","hostname":"fake","uptime_s":5}`)
		case "/api/v1/events":
			if r.Header.Get("Accept") != "text/event-stream" {
				http.Error(w, "not a stream", http.StatusBadRequest)
				return
			}
			if streams.Add(1) == 1 {
				// The head, a happening, then silence.
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "retry: 3000\n\nevent: touch\nid: 7\ndata: {\"x\":1}\n\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				dropped <- "silent stream"
				return
			}
			// Taken and never answered.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			_, _ = io.Copy(io.Discard, conn) // until the driver closes it
			dropped <- "unanswered, Last-Event-ID " + r.Header.Get("Last-Event-ID")
		case "/api/v1/time":
			http.NotFound(w, r)
		default:
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	t.Cleanup(srv.Close) // after the driver stops (cleanups run last first)
	idle := 300 * time.Millisecond
	l, sink := startLAN(t, Options{StreamIdle: idle})
	if err := l.Add(srv.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 5*time.Second, "lost", func(s *recSink) bool { return len(s.LostWhy[srv.URL]) == 1 && len(s.Hs[srv.URL]) == 1 })
	sink.Mu.Lock()
	why := sink.LostWhy[srv.URL][0]
	sink.Mu.Unlock()
	if !strings.Contains(why, "no reply in 300ms") {
		t.Errorf("lost: %q", why)
	}
	for _, want := range []string{"silent stream", "unanswered, Last-Event-ID 7"} {
		select {
		case got := <-dropped:
			if got != want {
				t.Errorf("dropped %q, want %q", got, want)
			}
		case <-time.After(10 * idle):
			t.Fatalf("waiting for %q", want)
		}
	}
}

// TestClockNoTime: a board that answers GET /time with 404 (older
// firmware) is asked once and then left alone; it is still watched.
func TestClockNoTime(t *testing.T) {
	var times atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/info":
			_, _ = io.WriteString(w, `{"id":"old","hostname":"old","uptime_s":5}`)
		case "/api/v1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "retry: 3000\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/api/v1/time":
			times.Add(1)
			http.NotFound(w, r)
		default:
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	t.Cleanup(srv.Close) // after the driver stops (cleanups run last first)
	l, sink := startLAN(t, Options{ClockEvery: 20 * time.Millisecond, ClockMaxEvery: 20 * time.Millisecond})
	if err := l.Add(srv.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 5*time.Second, "seen", func(s *recSink) bool { return s.SeenN[srv.URL] == 1 })
	time.Sleep(200 * time.Millisecond) // ten periods
	if n := times.Load(); n != 1 {
		t.Fatalf("GET /time asked %d times, want once", n)
	}
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if sink.ClockN[srv.URL] != 0 || len(sink.LostWhy[srv.URL]) != 0 {
		t.Fatalf("clocks %d, lost %v", sink.ClockN[srv.URL], sink.LostWhy[srv.URL])
	}
}

// TestRestartSeenByStartTime: a board that restarted a while after its
// last start, read again with the same small uptime, and whose new boot
// is already past the last seq given (its replay goes on from there), is
// reported restarted before its happenings. Only an uptime smaller than
// the last one read counted: the soak saw a LAN board's new boot go on
// from the old one's seq, and its first happenings later out of order.
func TestRestartSeenByStartTime(t *testing.T) {
	clk := clock.NewFake(time.Unix(5000, 0))
	end := make(chan struct{})
	var streams atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/info":
			_, _ = io.WriteString(w, `{"id":"fake","hostname":"fake","uptime_s":1}`)
		case "/api/v1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			if streams.Add(1) == 1 {
				_, _ = io.WriteString(w, "event: touch\nid: 5\ndata: {\"seq\":5}\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-end: // the board restarts
				case <-r.Context().Done():
				}
				return
			}
			// The new boot, 10 s later, already at seq 6.
			_, _ = io.WriteString(w, "event: touch\nid: 6\ndata: {\"seq\":6}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/api/v1/time":
			http.NotFound(w, r)
		default:
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	t.Cleanup(srv.Close)
	l, sink := startLAN(t, Options{Clock: clk})
	if err := l.Add(srv.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 5*time.Second, "the first happening", func(s *recSink) bool { return len(s.Hs[srv.URL]) == 1 })
	clk.Advance(10 * time.Second)
	close(end)
	sink.Wait(t, 5*time.Second, "the new boot's happening", func(s *recSink) bool { return len(s.Hs[srv.URL]) == 2 })
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if sink.RestartedN[srv.URL] != 1 {
		t.Fatalf("restarts reported: %d, want 1 (log %v)", sink.RestartedN[srv.URL], sink.Log)
	}
}
