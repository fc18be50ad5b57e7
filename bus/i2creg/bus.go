package i2creg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Target is what a device does as an I2C target, seen one transaction at
// a time. A board's link server implements it; Bus calls it.
type Target interface {
	// Write handles a write transaction: the register number, then data.
	// data is the target's to keep. An error stands for a NACK.
	Write(reg Register, data []byte) error
	// Read handles a read transaction of n bytes from reg. It may return
	// fewer bytes; the controller then reads Pad bytes. The returned
	// slice is copied before Read's caller sees it.
	Read(reg Register, n int) ([]byte, error)
}

// GeneralCallTarget is a Target that may answer the general call address.
// GeneralCall is asked at each general call write, so a target can turn
// it on and off as its settings change.
type GeneralCallTarget interface {
	Target
	GeneralCall() bool
}

// Controller is the host's side of an I2C bus. Bus implements it; a real
// bus adapter can too.
type Controller interface {
	// Write writes reg then data to the target at addr. Writing to
	// GeneralCall reaches every target that has general call on.
	Write(ctx context.Context, addr uint8, reg Register, data []byte) error
	// Read writes reg to the target at addr, then reads n bytes.
	Read(ctx context.Context, addr uint8, reg Register, n int) ([]byte, error)
}

// MaxRead is the largest read Bus accepts.
const MaxRead = 256

// Bus is an in-memory I2C bus: it routes each transaction by 7-bit
// address to the attached target, one transaction at a time, as a real
// bus does. The zero value is not usable; call NewBus.
type Bus struct {
	turn chan struct{} // holds a token while a transaction runs

	mu      sync.Mutex
	targets map[uint8]Target
}

var _ Controller = (*Bus)(nil)

// NewBus returns a bus with no targets.
func NewBus() *Bus {
	return &Bus{turn: make(chan struct{}, 1), targets: map[uint8]Target{}}
}

// Attach puts t on the bus at addr (0x08-0x77).
func (b *Bus) Attach(addr uint8, t Target) error {
	if !ValidAddress(addr) {
		return fmt.Errorf("%w: 0x%02X", ErrAddress, addr)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.targets[addr]; ok {
		return fmt.Errorf("%w: 0x%02X", ErrAddressInUse, addr)
	}
	b.targets[addr] = t
	return nil
}

// Detach takes the target at addr off the bus; it is a no-op when there
// is none.
func (b *Bus) Detach(addr uint8) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.targets, addr)
}

// acquire waits for the bus to be free or ctx to end.
func (b *Bus) acquire(ctx context.Context) error {
	select {
	case b.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Bus) release() { <-b.turn }

func (b *Bus) target(addr uint8) (Target, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.targets[addr]
	return t, ok
}

// Write writes reg then data to the target at addr. A write to
// GeneralCall goes to every target whose GeneralCall reports true, in
// address order; it fails with ErrNoAck when there is none, and with the
// joined errors of the targets that refused it. data is copied for each
// target.
func (b *Bus) Write(ctx context.Context, addr uint8, reg Register, data []byte) error {
	if addr != GeneralCall && !ValidAddress(addr) {
		return fmt.Errorf("%w: 0x%02X", ErrAddress, addr)
	}
	if err := b.acquire(ctx); err != nil {
		return err
	}
	defer b.release()

	if addr != GeneralCall {
		t, ok := b.target(addr)
		if !ok {
			return fmt.Errorf("%w: write to 0x%02X", ErrNoAck, addr)
		}
		if err := t.Write(reg, slices.Clone(data)); err != nil {
			return fmt.Errorf("i2creg: write %v to 0x%02X: %w", reg, addr, err)
		}
		return nil
	}

	b.mu.Lock()
	targets := maps.Clone(b.targets)
	b.mu.Unlock()
	var errs []error
	acked := 0
	for _, a := range slices.Sorted(maps.Keys(targets)) {
		g, ok := targets[a].(GeneralCallTarget)
		if !ok || !g.GeneralCall() {
			continue
		}
		acked++
		if err := g.Write(reg, slices.Clone(data)); err != nil {
			errs = append(errs, fmt.Errorf("i2creg: general call %v to 0x%02X: %w", reg, a, err))
		}
	}
	if acked == 0 {
		return fmt.Errorf("%w: general call", ErrNoAck)
	}
	return errors.Join(errs...)
}

// Read writes reg to the target at addr, then reads n bytes (1 to
// MaxRead). What the target does not supply reads as Pad.
func (b *Bus) Read(ctx context.Context, addr uint8, reg Register, n int) ([]byte, error) {
	switch {
	case addr == GeneralCall:
		return nil, ErrGeneralCallRead
	case !ValidAddress(addr):
		return nil, fmt.Errorf("%w: 0x%02X", ErrAddress, addr)
	case n < 1 || n > MaxRead:
		return nil, fmt.Errorf("i2creg: read of %d bytes: %w", n, ErrReadLength)
	}
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer b.release()

	t, ok := b.target(addr)
	if !ok {
		return nil, fmt.Errorf("%w: read from 0x%02X", ErrNoAck, addr)
	}
	data, err := t.Read(reg, n)
	if err != nil {
		return nil, fmt.Errorf("i2creg: read %v from 0x%02X: %w", reg, addr, err)
	}
	out := make([]byte, n)
	m := copy(out, data)
	for i := m; i < n; i++ {
		out[i] = Pad
	}
	return out, nil
}
