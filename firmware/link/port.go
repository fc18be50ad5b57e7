package link

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/bus/transport"
)

// Port is the board's UART (or RS485 transceiver): the byte stream to the
// host. It outlives restarts, as the wire does; each boot's Server attaches
// its receive buffer to it. Reading never waits for the server (bytes go
// into the 2 KB receive buffer, and beyond it are lost as overruns), and
// writing never waits for the host: sends are queued and, when the queue
// is full because the host or wire is stuck, dropped and counted.
type Port struct {
	rw   io.ReadWriteCloser
	name string

	recv    atomic.Pointer[stream.Receiver]
	out     chan []byte
	dropped atomic.Uint64
	rxBytes atomic.Uint64
	txBytes atomic.Uint64

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	isClosed atomic.Bool
}

// SendQueue is how many writes may wait for the wire.
const SendQueue = 256

// OpenPort opens the transport addr names (see bus/transport) as the
// board's port.
func OpenPort(ctx context.Context, addr string) (*Port, error) {
	rw, err := transport.Open(ctx, addr)
	if err != nil {
		return nil, err
	}
	name := addr
	if n, ok := rw.(transport.Namer); ok {
		name = n.PathName()
	}
	return NewPort(rw, name), nil
}

// NewPort makes a port of an open byte stream.
func NewPort(rw io.ReadWriteCloser, name string) *Port {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Port{rw: rw, name: name, out: make(chan []byte, SendQueue), cancel: cancel}
	p.wg.Add(2)
	go p.readLoop()
	go p.writeLoop(ctx)
	return p
}

// Name is where the port is (a pty path, a listen address, a device).
func (p *Port) Name() string { return p.name }

func (p *Port) readLoop() {
	defer p.wg.Done()
	buf := make([]byte, 512)
	for {
		n, err := p.rw.Read(buf)
		if n > 0 {
			p.rxBytes.Add(uint64(n))
			if r := p.recv.Load(); r != nil {
				_, _ = r.Write(buf[:n])
			}
		}
		if err != nil {
			if p.isClosed.Load() {
				return
			}
			// A host that went away (EOF on a pty or socket) or a read
			// timeout: the wire stays; try again shortly.
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (p *Port) writeLoop(ctx context.Context) {
	defer p.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-p.out:
			if _, err := p.rw.Write(b); err == nil {
				p.txBytes.Add(uint64(len(b)))
			}
		}
	}
}

// attach makes r the receiver of incoming bytes (nil detaches).
func (p *Port) attach(r *stream.Receiver) { p.recv.Store(r) }

// send queues b for the wire without waiting; it reports false when the
// queue is full and b was dropped.
func (p *Port) send(b []byte) bool {
	select {
	case p.out <- b:
		return true
	default:
		p.dropped.Add(1)
		return false
	}
}

// Close closes the transport and stops the port's goroutines.
func (p *Port) Close() error {
	var err error
	p.once.Do(func() {
		p.isClosed.Store(true)
		p.cancel()
		err = p.rw.Close()
		p.wg.Wait()
	})
	return err
}
