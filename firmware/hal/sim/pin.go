package sim

import "sync/atomic"

// Pin is a simulated digital output, such as the link's ATTN line. It
// starts high (an open-drain line with its pull-up).
type Pin struct {
	low     atomic.Bool
	changes atomic.Uint64
}

// NewPin returns a pin that reads high.
func NewPin() *Pin { return &Pin{} }

// Set drives the pin high or low.
func (p *Pin) Set(high bool) error {
	if p.low.Swap(!high) != !high {
		p.changes.Add(1)
	}
	return nil
}

// High reports the pin's level.
func (p *Pin) High() bool { return !p.low.Load() }

// Changes counts level changes since the pin was made.
func (p *Pin) Changes() uint64 { return p.changes.Load() }
