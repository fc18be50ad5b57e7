package linux

import (
	"context"
	"fmt"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
)

// OpenDrain is a GPIO driven as an open-drain output, as the link's ATTN
// line is: low drives the line low; high lets go of it (input with the
// pull-up), so several boards may share one line. It implements hal.Pin.
type OpenDrain struct{ p gpio.PinIO }

var _ hal.Pin = (*OpenDrain)(nil)

// NewOpenDrain wraps p.
func NewOpenDrain(p gpio.PinIO) *OpenDrain { return &OpenDrain{p: p} }

// Set drives the line low, or lets it go high.
func (o *OpenDrain) Set(high bool) error {
	if high {
		return o.p.In(gpio.PullUp, gpio.NoEdge)
	}
	return o.p.Out(gpio.Low)
}

// Debounce is how long the BOOT button must read pressed, after its
// falling edge, to count.
const Debounce = 30 * time.Millisecond

// Button is a push button to ground on a GPIO with its pull-up, such as
// the BOOT button.
type Button struct {
	p   gpio.PinIO
	clk clock.Clock
}

// NewButton sets p up as an input with its pull-up, watching falling
// edges.
func NewButton(p gpio.PinIO, clk clock.Clock) (*Button, error) {
	if err := p.In(gpio.PullUp, gpio.FallingEdge); err != nil {
		return nil, fmt.Errorf("button %s: %w", p, err)
	}
	return &Button{p: p, clk: clk}, nil
}

// Run calls pressed once per press until ctx ends: a falling edge
// followed by the pin still low Debounce later. It rechecks ctx at least
// every quarter second.
func (b *Button) Run(ctx context.Context, pressed func()) {
	for ctx.Err() == nil {
		if !b.p.WaitForEdge(250 * time.Millisecond) {
			continue
		}
		if b.p.Read() != gpio.Low {
			continue
		}
		t := b.clk.NewTimer(Debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if b.p.Read() == gpio.Low {
			pressed()
		}
	}
}
