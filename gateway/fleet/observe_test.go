package fleet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCallKind(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/link", "GET /link"},
		{"GET", "/api/v1/leds?x=1", "GET /leds"},
		{"PATCH", "/link/events", "PATCH /link"},
		{"POST", "/scenes/apply", "POST /scenes"},
		{"GET", "/files/a/b/c", "GET /other"},
		{"GET", "/", "GET /other"},
		{"BREW", "/info", "OTHER /info"},
	} {
		if got := callKind(tc.method, tc.path); got != tc.want {
			t.Errorf("callKind(%s %s) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestObserve(t *testing.T) {
	s, _ := doSetup(t)
	var mu sync.Mutex
	var got []string
	s.f.Observe(func(o Observation) {
		mu.Lock()
		defer mu.Unlock()
		e := ""
		if o.Err != nil {
			e = " error"
		}
		got = append(got, o.Transport+" "+o.Kind+e)
	})
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Sorted(slices.Values(got))
		got = nil
		return out
	}
	ctx := context.Background()
	if _, err := s.f.Call(ctx, "b08", "GET", "/api/v1/leds", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.f.Call(ctx, "b03", "GET", "/link", nil); err != nil {
		t.Fatal(err)
	}
	// An unknown board reaches no transport: nothing to observe.
	if _, err := s.f.Call(ctx, "nope", "GET", "/info", nil); !errors.Is(err, ErrUnknownBoard) {
		t.Fatal(err)
	}
	if diff := cmp.Diff(take(), []string{"lan GET /leds", "rs485 GET /link"}); diff != "" {
		t.Errorf("calls (-got +want)\n%s", diff)
	}
	if _, err := s.f.Do(ctx, Selector{Groups: []int{1}}, Action{Kind: ActionSceneApply, Body: []byte(`{"slot":4}`)}); err != nil {
		t.Fatal(err)
	}
	want := []string{"group scene_apply", "group scene_apply", "lan scene_apply"}
	if diff := cmp.Diff(take(), want); diff != "" {
		t.Errorf("do (-got +want)\n%s", diff)
	}
}
