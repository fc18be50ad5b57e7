package events

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

type touchFields struct {
	Action string `json:"action"`
	X      int    `json:"x"`
	Y      int    `json:"y"`
}

// BenchmarkEmitToSubscriber measures one happening from Emit to Next on an
// in-process subscriber.
func BenchmarkEmitToSubscriber(b *testing.B) {
	h := New(clock.Real, nil, Options{})
	defer h.Close()
	s := h.Subscribe(Filter{}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.Emit(KindTouch, touchFields{"down", 120, 64})
		if _, err := s.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetStateToSubscriber is the same for a state.
func BenchmarkSetStateToSubscriber(b *testing.B) {
	h := New(clock.Real, nil, Options{})
	defer h.Close()
	s := h.Subscribe(Filter{}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.SetState(KindLEDs, map[string]int{"brightness": 30})
		if _, err := s.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSSELatency measures SetState until the frame's last byte is read
// by an HTTP client on loopback, one change at a time, and reports p50 and
// p99 in microseconds and p99 as a ratio of the 5 ms target.
func BenchmarkSSELatency(b *testing.B) {
	h := New(clock.Real, nil, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events?kinds=leds", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	frame := func() string {
		var sb strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			sb.WriteString(line)
			if line == "\n" {
				return sb.String()
			}
		}
	}
	frame() // retry
	state := map[string]int{"brightness": 30}
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		h.SetState(KindLEDs, state)
		frame()
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)] }
	b.ReportMetric(float64(pct(0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(pct(0.99).Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(pct(0.99))/float64(5*time.Millisecond), "p99/5ms-ratio")
}
