package console

import (
	"context"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/holofleet/holofleet/bus/transport"
)

// Stdio is the console address of the process's standard input and
// output.
const Stdio = "stdio"

// Port is the byte stream the console is on.
type Port struct {
	r     io.Reader
	w     io.Writer
	c     io.Closer // nil for stdio
	name  string
	nl    string
	echo  bool
	stdio bool

	closed atomic.Bool
}

// Open opens the console transport addr names: Stdio (in and out), or any
// bus/transport address: pty, tcp://HOST:PORT (a listener; one client at
// a time), a serial device path or serial:// URL.
//
// Output lines end in CRLF on every transport but stdio (a raw pty or a
// UART shows bare LFs as stairs) and in LF on stdio. The console echoes
// each line it reads, so a transcript reads like a session, except on a
// stdio terminal, which echoes by itself.
func Open(ctx context.Context, addr string, in *os.File, out io.Writer) (*Port, error) {
	if addr == Stdio {
		return &Port{r: in, w: out, name: Stdio, nl: "\n", echo: !IsTerminal(in), stdio: true}, nil
	}
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

// NewPort makes a console port of an open byte stream (CRLF, echo on).
func NewPort(rw io.ReadWriteCloser, name string) *Port {
	return &Port{r: rw, w: rw, c: rw, name: name, nl: "\r\n", echo: true}
}

// Name is where the console is: stdio, a pty path, a listen address, a
// device.
func (p *Port) Name() string { return p.name }

// Close closes the transport (stdio is left open), which ends Serve.
func (p *Port) Close() error {
	if p.closed.Swap(true) || p.c == nil {
		return nil
	}
	return p.c.Close()
}

func (p *Port) isClosed() bool { return p.closed.Load() }

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// PowerCutCode is the exit status of holo-board after the simulator's
// power is pulled (POST /sim/power, power off): 137, what a shell reports
// for a process killed with SIGKILL.
const PowerCutCode = 137
