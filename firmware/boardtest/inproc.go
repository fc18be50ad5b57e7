package boardtest

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/firmware/screen"
	"github.com/holofleet/holofleet/store"
)

// InProcOptions says how StartInProcess builds a board.
type InProcOptions struct {
	// Dir is the data dir; a new temp dir when empty.
	Dir string
	// Port is the byte stream the host link runs on (a pipe end, a
	// simulated line node); nil for a board without a UART.
	Port io.ReadWriteCloser
	// PortName names the link port in logs ("test" when empty).
	PortName string
	// I2C is the simulated I2C bus the board sits on; nil when none.
	I2C *i2creg.Bus
	// Link, when set, is saved into Dir before the board's first start.
	Link *link.Settings
	// Addr is the HTTP listen address ("127.0.0.1:0" when empty); a fixed
	// one lets a test start a board again where clients expect it.
	Addr string
	// Extra features installed after the built-in ones.
	Extra []board.Feature
	// Hardware is the board's devices; nil means a new simulated set
	// (tests wrap one to see when the board drives them).
	Hardware *board.Hardware
	// NoI2CTarget, when set, makes a board that can never be an I2C
	// target, as on the Linux HAL (see assemble.Options).
	NoI2CTarget string
	// Clock is the board's clock (nil: the real one); clock.Skewed makes
	// a board whose crystal is off.
	Clock clock.Clock
}

// InProc is a board running in the test's own process.
type InProc struct {
	Board *board.Board
	// Port is the link's end of Options.Port (nil without one).
	Port *link.Port
	Dir  string
	// Addr is the HTTP listen address (IP:port) and URL the same as
	// http://IP:port.
	Addr string
	URL  string

	stop func()
}

// Stop ends the board and closes its port; later calls do nothing. It
// runs on test cleanup as well.
func (p *InProc) Stop() { p.stop() }

// Emit records a happening on the current boot's hub.
func (p *InProc) Emit(kind string, fields map[string]any) {
	p.Board.Current().Hub.Emit(kind, fields)
}

// PresetLink saves link settings into a data dir before a board starts
// from it.
func PresetLink(t testing.TB, dir string, s link.Settings) {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "settings.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Bucket("link").Put("link", s); err != nil {
		t.Fatal(err)
	}
}

// StartInProcess opens a board with every firmware feature, serves its
// HTTP API on loopback and waits until it answers. A benchmark's timer is
// paused meanwhile.
func StartInProcess(t testing.TB, o InProcOptions) *InProc {
	t.Helper()
	if tb, ok := t.(*testing.B); ok {
		tb.StopTimer()
		defer tb.StartTimer()
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.PortName == "" {
		o.PortName = "test"
	}
	if o.Link != nil {
		PresetLink(t, o.Dir, *o.Link)
	}
	var ln net.Listener
	var err error
	for range 50 { // a board stopped a moment ago may still hold the port
		if ln, err = net.Listen("tcp", o.Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	var port *link.Port
	if o.Port != nil {
		port = link.NewPort(o.Port, o.PortName)
	}
	ready := make(chan struct{})
	b, err := board.Open(board.Config{DataDir: o.Dir,
		Features: assemble.Features(assemble.Options{Port: port, I2C: o.I2C, Extra: o.Extra, NoI2CTarget: o.NoI2CTarget}),
		Hardware: o.Hardware, Clock: o.Clock, OnReady: func(net.Addr) { close(ready) }})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, ln) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("board stopped: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("board did not start")
	}
	p := &InProc{Board: b, Port: port, Dir: o.Dir, Addr: ln.Addr().String()}
	p.URL = "http://" + p.Addr
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if port != nil {
				port.Close()
			}
		})
	}
	t.Cleanup(p.stop)
	return p
}

// ClipTimeline returns where the clip the board's screen plays is on its
// timeline (screen.Controller.ClipTimeline); ok is false when none plays.
func (p *InProc) ClipTimeline() (screen.Timeline, bool) {
	boot := p.Board.Current()
	if boot == nil {
		return screen.Timeline{}, false
	}
	c := assemble.ScreenOf(boot)
	if c == nil {
		return screen.Timeline{}, false
	}
	return c.ClipTimeline()
}

// Aligned reports whether a gateway has told the board how its clock
// lines up with the gateway's in this boot (PUT /time, clip-sync).
func (p *InProc) Aligned() bool {
	boot := p.Board.Current()
	if boot == nil || boot.Align == nil {
		return false
	}
	_, ok := boot.Align.Epoch()
	return ok
}

// Pipe returns two connected byte streams: TCP on loopback, so a write
// does not wait for the reader as with net.Pipe. Both close when the test
// ends.
func Pipe(t testing.TB) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, ok := <-ch
	if !ok {
		a.Close()
		t.Fatal("pipe: accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
