package lan

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestDiscoverAddsBrowsedBoards(t *testing.T) {
	l := New(Options{})
	var calls atomic.Int32
	browse := func(_ context.Context, service string, _ time.Duration) ([]Found, error) {
		if service != "_holofleet._tcp" {
			t.Errorf("browsed %q", service)
		}
		n := calls.Add(1)
		out := []Found{{Host: "holo-ab12.local.", Addr: net.IPv4(127, 0, 0, 1), Port: 8081, ID: "0200000000ab12"}}
		if n > 1 {
			out = append(out, Found{Host: "holo-cd34.local.", Addr: net.IPv4(127, 0, 0, 2), Port: 8082})
		}
		return out, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Discover(ctx, DiscoverOptions{Browse: browse, Every: 10 * time.Millisecond}) }()
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := l.Boards()
	slices.Sort(got)
	want := []string{"http://127.0.0.1:8081", "http://127.0.0.2:8082"}
	if !slices.Equal(got, want) {
		t.Fatalf("boards %v, want %v", got, want)
	}
}
