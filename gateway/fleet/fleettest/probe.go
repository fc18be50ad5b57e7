package fleettest

import (
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
)

// FrameProbe listens on a simulated line and notes when each native frame
// ended on the wire (its closing delimiter), by the wire's schedule
// (simline's Tap), not when a reader woke: the moment a frame's last bit
// reached the boards.
type FrameProbe struct {
	char time.Duration

	mu     sync.Mutex
	run    []byte
	buf    []byte
	frames []ProbedFrame
}

// ProbedFrame is one frame heard: its address, type and end.
type ProbedFrame struct {
	Addr frame.Address
	Type frame.Type
	End  time.Time
}

// AttachProbe attaches a probe to line as a node named "probe"; it stops
// with the line.
func AttachProbe(line *simline.Line) (*FrameProbe, error) {
	p := &FrameProbe{char: line.WireTime(1), buf: make([]byte, 0, frame.MaxLen)}
	node, err := line.Attach(simline.NodeOptions{Name: "probe", RxBuffer: 4 << 10, Tap: p.tap})
	if err != nil {
		return nil, err
	}
	go func() { // keep the receive buffer drained
		b := make([]byte, 1<<10)
		for {
			if _, err := node.Read(b); err != nil {
				return
			}
		}
	}()
	return p, nil
}

// tap takes bytes as the line delivers them; byte i of b arrived
// (len(b)-1-i) characters before at.
func (p *FrameProbe) tap(b []byte, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range b {
		if c != frame.Delimiter {
			if len(p.run) < frame.MaxWireLen {
				p.run = append(p.run, c)
			}
			continue
		}
		if len(p.run) > 0 {
			f, raw, err := frame.Decode(p.buf, p.run)
			p.buf = raw[:0]
			if err == nil {
				end := at.Add(-time.Duration(len(b)-1-i) * p.char)
				p.frames = append(p.frames, ProbedFrame{Addr: f.Addr, Type: f.Type, End: end})
				if len(p.frames) > 4096 {
					p.frames = append(p.frames[:0], p.frames[2048:]...)
				}
			}
		}
		p.run = p.run[:0]
	}
}

// First returns the end of the first frame to addr of type t that ended
// at or after since.
func (p *FrameProbe) First(since time.Time, addr frame.Address, t frame.Type) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frames {
		if f.Addr == addr && f.Type == t && !f.End.Before(since) {
			return f.End, true
		}
	}
	return time.Time{}, false
}

// Await waits up to timeout (real time) for First to find a frame.
func (p *FrameProbe) Await(since time.Time, addr frame.Address, t frame.Type, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if end, ok := p.First(since, addr, t); ok {
			return end, true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(100 * time.Microsecond)
	}
}
