// Package longop is the board-wide lock of long operations. A firmware
// upload or pull, a file upload, download or copy, a file's SHA-256 and a
// Wi-Fi scan run one at a time; while one runs, another is refused with
// 409 busy at once (never queued), and every other request is still
// answered because nothing else takes this lock.
//
// Because a long operation shuts out every other, one must not wait on a
// client forever: the bytes an upload or a pull reads (and a download
// writes) go through [Lock.Watch] (or [Lock.WatchWriter]), which cuts the
// operation once it has waited Idle (30 s by default) for a single byte.
// The operation then fails with [ErrStalled], gives back the lock as it
// would on any failure, and the board hears of the cut through OnCut.
package longop

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

// DefaultIdle is how long a long operation may wait for its client to
// send (or take) a byte before it is cut.
const DefaultIdle = 30 * time.Second

// ErrStalled means a long operation's client sent (or took) no byte for
// the idle timeout and the operation was cut.
var ErrStalled = errors.New("longop: stalled")

// Lock admits one long operation at a time. The zero value is ready; set
// the exported fields before first use.
type Lock struct {
	// Idle is how long a watched read or write may wait before the
	// operation is cut (DefaultIdle when 0).
	Idle time.Duration
	// Clock times Idle (clock.Real when nil).
	Clock clock.Clock
	// OnCut, when set, is told of every operation cut for stalling, from
	// the timer's goroutine, with nothing locked.
	OnCut func(Cut)

	mu      sync.Mutex
	holder  string
	lastCut *Cut
}

// Cut describes a long operation cut because its client stalled.
type Cut struct {
	// What names the operation, as given to Watch.
	What string
	// Bytes is how many bytes had passed before it stalled.
	Bytes int64
	// Idle is how long it waited.
	Idle time.Duration
	// At is when it was cut, by the lock's clock.
	At time.Time
}

// TryAcquire takes the lock for the operation named what, or returns a
// 409 busy error naming the operation that holds it. The returned release
// function is safe to call more than once.
func (l *Lock) TryAcquire(what string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder != "" {
		return nil, api.Errorf(api.ErrBusy, "%s is running; long operations run one at a time", l.holder)
	}
	l.holder = what
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.holder = ""
			l.mu.Unlock()
		})
	}, nil
}

// Holder names the running long operation, or "" when none runs.
func (l *Lock) Holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

// LastCut returns the last operation cut for stalling, nil when none was.
func (l *Lock) LastCut() *Cut {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastCut == nil {
		return nil
	}
	c := *l.lastCut
	return &c
}

func (l *Lock) idle() time.Duration {
	if l == nil || l.Idle <= 0 {
		return DefaultIdle
	}
	return l.Idle
}

func (l *Lock) clock() clock.Clock {
	if l == nil || l.Clock == nil {
		return clock.Real
	}
	return l.Clock
}

func (l *Lock) cut(c Cut) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.lastCut = &c
	on := l.OnCut
	l.mu.Unlock()
	if on != nil {
		on(c)
	}
}

// Watch wraps r, the bytes the long operation named what reads from its
// client. A Read that waits Idle without returning calls abort, which
// must make that Read return (set the connection's read deadline to now,
// cancel the fetch's context); the Read, and every later one, then fails
// with an error wrapping ErrStalled. Time spent between Reads (writing to
// flash) does not count. A nil Lock watches with the defaults.
func (l *Lock) Watch(r io.Reader, what string, abort func()) io.Reader {
	return &watchedReader{r: r, dog: newDog(l, what, abort)}
}

// WatchWriter is Watch for the bytes a long operation writes to its
// client (a download to a client that stopped reading).
func (l *Lock) WatchWriter(w io.Writer, what string, abort func()) io.Writer {
	return &watchedWriter{w: w, dog: newDog(l, what, abort)}
}

// dog is the watchdog of one watched stream: armed while a call waits.
type dog struct {
	l     *Lock
	clk   clock.Clock
	idle  time.Duration
	what  string
	abort func()

	mu      sync.Mutex
	timer   clock.Timer
	n       int64 // bytes that passed
	stalled bool
}

func newDog(l *Lock, what string, abort func()) *dog {
	return &dog{l: l, clk: l.clock(), idle: l.idle(), what: what, abort: abort}
}

// arm starts the wait of one call; it fails once the stream was cut.
func (d *dog) arm() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stalled {
		return d.err()
	}
	if d.timer == nil {
		d.timer = d.clk.AfterFunc(d.idle, d.fire)
	} else {
		d.timer.Reset(d.idle)
	}
	return nil
}

// disarm ends the wait of a call that moved n bytes; err is its error,
// replaced when the stream was cut meanwhile.
func (d *dog) disarm(n int, err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer.Stop()
	d.n += int64(n)
	if d.stalled {
		return d.err()
	}
	return err
}

func (d *dog) fire() {
	d.mu.Lock()
	if d.stalled {
		d.mu.Unlock()
		return
	}
	d.stalled = true
	c := Cut{What: d.what, Bytes: d.n, Idle: d.idle, At: d.clk.Now()}
	d.mu.Unlock()
	if d.abort != nil {
		d.abort()
	}
	d.l.cut(c)
}

// err is the error of a cut stream; d.mu held.
func (d *dog) err() error {
	return fmt.Errorf("%w: %s: no bytes for %s (after %d)", ErrStalled, d.what, d.idle, d.n)
}

type watchedReader struct {
	r   io.Reader
	dog *dog
}

func (w *watchedReader) Read(p []byte) (int, error) {
	if err := w.dog.arm(); err != nil {
		return 0, err
	}
	n, err := w.r.Read(p)
	return n, w.dog.disarm(n, err)
}

type watchedWriter struct {
	w   io.Writer
	dog *dog
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	if err := w.dog.arm(); err != nil {
		return 0, err
	}
	n, err := w.w.Write(p)
	return n, w.dog.disarm(n, err)
}
