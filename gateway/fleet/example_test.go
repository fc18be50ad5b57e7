package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Prepare is the one preparation of an action every surface makes: the
// body decoded and checked by the board's rules, the selector checked,
// the moment resolved on the clock given.
func ExamplePrepare() {
	now := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	p, err := fleet.Prepare(fleet.Selector{Groups: []int{2}},
		fleet.Action{Kind: fleet.ActionLEDs, Body: []byte(`{"mode":"solid","colour":"red","loop":true}`), Lead: 250 * time.Millisecond},
		now)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := p.Body.Request()
	fmt.Println(p.Kind(), req.Method, req.Path, string(req.Body))
	fmt.Println("fires at", p.At.Format("15:04:05.000"))

	// Group 0 is no group (the spec's groups are 1-31), on every surface.
	_, err = fleet.Prepare(fleet.Selector{Groups: []int{0}}, fleet.Action{Kind: fleet.ActionSceneEnd}, now)
	fmt.Println(errors.Is(err, fleet.ErrBadSelector), err)

	// A body a board would refuse is refused before anything is sent.
	_, err = fleet.Prepare(fleet.Selector{All: true}, fleet.Action{Kind: fleet.ActionLEDs, Body: []byte(`{"brightness":0}`)}, now)
	fmt.Println(errors.Is(err, fleet.ErrBadAction))
	// Output:
	// leds PATCH /leds {"mode":"solid","colour":"red","loop":true}
	// fires at 20:00:00.250
	// true fleet: bad selector: group 0 (groups are 1-31)
	// true
}

// lamps is a driver reaching two boards at addresses "1" and "2" (a
// stand-in for the LAN driver): it reports them seen and answers every
// call with 200.
type lamps struct{ ready chan struct{} }

func (l *lamps) Name() string { return "demo" }

func (l *lamps) Run(ctx context.Context, sink fleet.Sink) error {
	for _, id := range []string{"lamp-1", "lamp-2"} {
		sink.Seen(fleet.Ref{Driver: "demo", Addr: id[len(id)-1:]},
			[]byte(`{"id":"`+id+`","hostname":"`+id+`","firmware":{"version":"1.0.0"}}`))
	}
	close(l.ready)
	<-ctx.Done()
	return nil
}

func (l *lamps) Call(_ context.Context, addr, method, path string, body []byte) (fleet.Reply, error) {
	return fleet.Reply{Status: 200, Body: []byte(`{}`)}, nil
}

// Do prepares the action and runs it on every selected board, each
// reached by the transport that fits; the results are one a board, by id.
func ExampleFleet_Do() {
	clk := clock.NewFake(time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC))
	d := &lamps{ready: make(chan struct{})}
	f := fleet.New(fleet.Options{Drivers: []fleet.Driver{d}, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	<-d.ready

	res, err := f.Do(ctx, fleet.Selector{Boards: []string{"lamp-1", "lamp-2"}},
		fleet.Action{Kind: fleet.ActionScreenShow, Body: []byte(`{"colour":"blue"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		fmt.Println(r.Board, r.Via, r.Reply.Status, r.Error == "")
	}
	_, err = f.Do(ctx, fleet.Selector{Boards: []string{"lamp-3"}}, fleet.Action{Kind: fleet.ActionScreenOff})
	fmt.Println(err)
	// Output:
	// lamp-1 lan 200 true
	// lamp-2 lan 200 true
	// fleet: unknown board: "lamp-3"
}
