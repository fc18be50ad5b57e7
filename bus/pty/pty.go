// Package pty makes a pseudo-terminal pair so a simulated board can offer a
// UART that any program (or bus/serialport) opens like a real serial device.
//
// The board keeps the master side, an [io.ReadWriteCloser]; the slave side
// is a path such as /dev/pts/7 that a host opens. Both ends are put in raw
// mode: no echo, no line editing, no CR/LF translation, no signals, 8-bit
// clean, so the bytes of native frames (including 0x00, 0x03, 0x0D, 0x11,
// 0x13) pass unchanged in both directions.
//
// While the [Pty] is open it also holds one descriptor on the slave itself.
// Without it, Linux makes reads on the master fail with EIO whenever no
// program has the slave open (before the host opens it and after the host
// closes it); with it, the master's reads simply block until a host writes,
// like a UART with the cable unplugged. That descriptor never reads, so it
// takes no bytes away from the host.
//
// The package is Linux-only: it uses /dev/ptmx, TIOCSPTLCK and TIOCGPTN.
package pty

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Errors returned by this package.
var (
	// ErrUnsupported means the system offers no /dev/ptmx pty multiplexer.
	ErrUnsupported = errors.New("pty: pseudo-terminals not supported here")
	// ErrClosed is returned by Read and Write after Close.
	ErrClosed = errors.New("pty: closed")
)

// MultiplexerPath is the pty multiplexer opened to make a new pair.
const MultiplexerPath = "/dev/ptmx"

// Pty is the master side of a pseudo-terminal pair.
type Pty struct {
	master    *os.File
	slaveHold *os.File
	slavePath string

	closeOnce sync.Once
	closeErr  error
}

// Open makes a new raw pty pair and returns its master side.
func Open() (*Pty, error) {
	master, err := os.OpenFile(MultiplexerPath, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("pty: open %s: %w", MultiplexerPath, err)
	}
	fail := func(step string, err error) (*Pty, error) {
		master.Close()
		return nil, fmt.Errorf("pty: %s: %w", step, err)
	}
	raw, err := master.SyscallConn()
	if err != nil {
		return fail("raw conn", err)
	}
	var num uint32
	var ctlErr error
	err = raw.Control(func(fd uintptr) {
		// Unlock the slave, then learn its number.
		if ctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ctlErr != nil {
			ctlErr = fmt.Errorf("unlockpt: %w", ctlErr)
			return
		}
		if num, ctlErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN); ctlErr != nil {
			ctlErr = fmt.Errorf("ptsname: %w", ctlErr)
			return
		}
		ctlErr = makeRaw(int(fd))
	})
	if err == nil {
		err = ctlErr
	}
	if err != nil {
		return fail("set up master", err)
	}
	path := "/dev/pts/" + strconv.FormatUint(uint64(num), 10)
	slave, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fail("open slave", err)
	}
	sraw, err := slave.SyscallConn()
	if err == nil {
		err = sraw.Control(func(fd uintptr) { ctlErr = makeRaw(int(fd)) })
		if err == nil {
			err = ctlErr
		}
	}
	if err != nil {
		slave.Close()
		return fail("raw slave", err)
	}
	return &Pty{master: master, slaveHold: slave, slavePath: path}, nil
}

// makeRaw applies the equivalent of cfmakeraw(3) to fd.
func makeRaw(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("tcgets: %w", err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8 | unix.CREAD | unix.CLOCAL
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return fmt.Errorf("tcsets: %w", err)
	}
	return nil
}

// SlavePath is the device path a host opens, such as /dev/pts/7.
func (p *Pty) SlavePath() string { return p.slavePath }

// PathName is SlavePath under the name bus/transport looks for.
func (p *Pty) PathName() string { return p.slavePath }

// Read reads bytes the host wrote to the slave. It blocks until at least
// one byte arrives, the read deadline passes, or Close is called.
func (p *Pty) Read(b []byte) (int, error) {
	n, err := p.master.Read(b)
	return n, p.mapErr(err)
}

// Write sends bytes to the host reading the slave. It blocks while the
// slave's input queue is full.
func (p *Pty) Write(b []byte) (int, error) {
	n, err := p.master.Write(b)
	return n, p.mapErr(err)
}

// SetReadDeadline makes a blocked or later Read fail with an error matching
// os.ErrDeadlineExceeded once t passes; the zero time removes the deadline.
func (p *Pty) SetReadDeadline(t time.Time) error { return p.master.SetReadDeadline(t) }

func (p *Pty) mapErr(err error) error {
	if err != nil && errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// Close closes both the master and the held slave descriptor, unblocking
// any Read or Write in progress. A host that still has the slave open then
// sees end of file or EIO. Close is idempotent.
func (p *Pty) Close() error {
	p.closeOnce.Do(func() {
		err1 := p.master.Close()
		err2 := p.slaveHold.Close()
		p.closeErr = errors.Join(err1, err2)
	})
	return p.closeErr
}
