package assemble

import (
	"context"
	"time"

	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/console"
	"github.com/holofleet/holofleet/firmware/hal/sim"
	"github.com/holofleet/holofleet/firmware/simview"
)

type powerKey struct{}

// PowerCut returns a feature that makes cut what pulling the simulated
// board's power does (POST /sim/power, the console's power off). Put it
// before the built-in features; without it the power endpoint answers
// that this simulator has no power switch. cut may not return.
func PowerCut(cut func()) board.Feature {
	return func(b *board.Boot) error {
		b.Set(powerKey{}, cut)
		return nil
	}
}

// Console installs what the console drives in every boot: touch reporting
// (the touch controller read all the time; touch happenings while the
// console's touch on holds; status block flag bit 0) and, on simulated
// hardware, the simulator's inputs (BOOT button, touch, power). The
// console itself lives in the process, across restarts, and reaches each
// boot through console.BoardTarget.
func Console(b *board.Boot) error {
	hw := b.Board.Hardware()
	t := console.NewTouch(b.Hub)
	console.SetTouch(b, t)
	b.AddStatus(t.Status)
	if hw.Touch != nil {
		b.Go(func(ctx context.Context) { t.Run(ctx, hw.Touch) })
	}
	d, ok := hw.Display.(*sim.Display)
	if !ok {
		return nil
	}
	in := &simview.Inputs{Touch: d, AfterFunc: func(delay time.Duration, f func()) { b.Clock.AfterFunc(delay, f) }}
	if n := NetworkOf(b); n != nil {
		in.Boot = func() { n.PressBoot() }
	}
	if cut, ok := b.Value(powerKey{}).(func()); ok {
		in.Power = cut
	}
	b.AddFeature("", in.Routes()...)
	return nil
}
