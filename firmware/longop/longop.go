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
//
// The idle cut alone is beaten by a client that sends one byte every 20 s
// (issue 25 row 12), so a watched stream is also cut:
//
//   - when it is too slow: over each RateWindow of time spent waiting on
//     the client (30 s by default; time the board spends between reads,
//     writing flash, does not count) at least MinRate bytes a second
//     (1 KiB/s by default) must have moved, else the stream fails with
//     [ErrTooSlow] at the end of that window's read. A trickling client
//     therefore holds the lock at most RateWindow + Idle (60 s with the
//     defaults).
//   - when it runs past its deadline: a stream of declared length n (see
//     [Lock.WatchN]) must end within DeadlineBase (2 min by default) plus
//     twice the time n bytes take at MinRate (a 2 MB firmware image at
//     1 KiB/s: 2 min + 68 min), wall time, flash writes included; past it
//     the stream fails with [ErrDeadline], a pending read aborted.
//
// ErrTooSlow and ErrDeadline wrap ErrStalled: every caller treats all
// three cuts alike (400, .part removed, session failed, lock given back).
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

// Defaults of the minimum rate and the deadline (see the package doc).
const (
	// DefaultMinRate is the slowest average, bytes a second, a watched
	// stream may move over a rate window: 1 KiB/s, a hundredth of the
	// slowest Wi-Fi link a board is used on, far above a trickle.
	DefaultMinRate = 1024
	// DefaultRateWindow is the waiting time the rate is averaged over.
	DefaultRateWindow = 30 * time.Second
	// DefaultDeadlineBase is the deadline of a stream of declared length
	// 0; each declared byte adds twice its time at the minimum rate.
	DefaultDeadlineBase = 2 * time.Minute
)

// Why a stream was cut (Cut.Reason).
const (
	ReasonStalled  = "stalled"
	ReasonTooSlow  = "too_slow"
	ReasonDeadline = "deadline"
)

// ErrStalled means a long operation's client sent (or took) no byte for
// the idle timeout and the operation was cut. Every cut wraps it.
var ErrStalled = errors.New("longop: stalled")

// ErrTooSlow means a long operation's client moved fewer than MinRate
// bytes a second over a rate window and the operation was cut.
var ErrTooSlow = fmt.Errorf("%w: below the minimum rate", ErrStalled)

// ErrDeadline means a long operation ran past the deadline its declared
// length allows and was cut.
var ErrDeadline = fmt.Errorf("%w: past its deadline", ErrStalled)

// Lock admits one long operation at a time. The zero value is ready; set
// the exported fields before first use.
type Lock struct {
	// Idle is how long a watched read or write may wait before the
	// operation is cut (DefaultIdle when 0).
	Idle time.Duration
	// MinRate is the slowest average, bytes a second over a RateWindow
	// of waiting, a watched stream may move (DefaultMinRate when 0; a
	// negative value turns the rate check off).
	MinRate int64
	// RateWindow is the waiting time MinRate is averaged over
	// (DefaultRateWindow when 0).
	RateWindow time.Duration
	// DeadlineBase is the deadline of a stream declared empty; a stream
	// of n bytes gets DeadlineBase + 2*n/MinRate seconds
	// (DefaultDeadlineBase when 0; a negative value turns deadlines off).
	DeadlineBase time.Duration
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
	// Idle is how long it waited: the idle timeout for a stall, the
	// rate window for a stream too slow, the time since it began for a
	// deadline.
	Idle time.Duration
	// Reason is ReasonStalled, ReasonTooSlow or ReasonDeadline.
	Reason string
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

func (l *Lock) minRate() int64 {
	if l == nil || l.MinRate == 0 {
		return DefaultMinRate
	}
	return l.MinRate
}

func (l *Lock) rateWindow() time.Duration {
	if l == nil || l.RateWindow <= 0 {
		return DefaultRateWindow
	}
	return l.RateWindow
}

// Deadline is how long a watched stream of n declared bytes may run.
// It is 0 (none) when n < 0 or deadlines are off.
func (l *Lock) Deadline(n int64) time.Duration {
	base := DefaultDeadlineBase
	if l != nil && l.DeadlineBase != 0 {
		base = l.DeadlineBase
	}
	if n < 0 || base < 0 {
		return 0
	}
	rate := l.minRate()
	if rate <= 0 {
		rate = DefaultMinRate
	}
	extra := time.Duration(float64(2*n) / float64(rate) * float64(time.Second))
	return base + extra
}

func (l *Lock) clock() clock.Clock {
	if l == nil || l.Clock == nil {
		return clock.Real
	}
	return l.Clock
}

// record makes c the last cut.
func (l *Lock) record(c Cut) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.lastCut = &c
	l.mu.Unlock()
}

// cut tells OnCut of c, already recorded.
func (l *Lock) cut(c Cut) {
	if l == nil {
		return
	}
	l.mu.Lock()
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
// flash) does not count. The stream is also cut, with ErrTooSlow, when it
// falls below the minimum rate. A nil Lock watches with the defaults.
// Watch sets no deadline: use WatchN when the length is declared.
func (l *Lock) Watch(r io.Reader, what string, abort func()) io.Reader {
	return l.WatchN(r, what, -1, abort)
}

// WatchN is Watch for a stream of n declared bytes (n < 0: unknown), cut
// with ErrDeadline once it runs longer than Deadline(n).
func (l *Lock) WatchN(r io.Reader, what string, n int64, abort func()) io.Reader {
	return &watchedReader{r: r, dog: newDog(l, what, n, abort)}
}

// WatchWriter is Watch for the bytes a long operation writes to its
// client (a download to a client that stopped reading).
func (l *Lock) WatchWriter(w io.Writer, what string, abort func()) io.Writer {
	return l.WatchWriterN(w, what, -1, abort)
}

// WatchWriterN is WatchN for the bytes a long operation writes.
func (l *Lock) WatchWriterN(w io.Writer, what string, n int64, abort func()) io.Writer {
	return &watchedWriter{w: w, dog: newDog(l, what, n, abort)}
}

// dog is the watchdog of one watched stream: armed while a call waits.
type dog struct {
	l        *Lock
	clk      clock.Clock
	idle     time.Duration
	minRate  int64
	window   time.Duration
	began    time.Time
	deadline time.Time // zero: none
	what     string
	abort    func()

	mu        sync.Mutex
	timer     clock.Timer
	n         int64         // bytes that passed
	armedAt   time.Time     // when the pending call began
	waited    time.Duration // time spent in calls
	winWaited time.Duration // waited when the current rate window began
	winN      int64         // n when the current rate window began
	cutErr    error         // set once the stream is cut
}

func newDog(l *Lock, what string, n int64, abort func()) *dog {
	d := &dog{l: l, clk: l.clock(), idle: l.idle(), minRate: l.minRate(), window: l.rateWindow(), what: what, abort: abort}
	d.began = d.clk.Now()
	if dl := l.Deadline(n); dl > 0 {
		d.deadline = d.began.Add(dl)
	}
	return d
}

// arm starts the wait of one call; it fails once the stream was cut.
func (d *dog) arm() error {
	d.mu.Lock()
	if d.cutErr != nil {
		defer d.mu.Unlock()
		return d.cutErr
	}
	now := d.clk.Now()
	wait := d.idle
	if !d.deadline.IsZero() {
		left := d.deadline.Sub(now)
		if left <= 0 {
			c := d.cutLocked(ReasonDeadline, now)
			err := d.cutErr
			d.mu.Unlock()
			d.l.cut(c)
			return err
		}
		wait = min(wait, left)
	}
	d.armedAt = now
	if d.timer == nil {
		d.timer = d.clk.AfterFunc(wait, d.fire)
	} else {
		d.timer.Reset(wait)
	}
	d.mu.Unlock()
	return nil
}

// disarm ends the wait of a call that moved n bytes; err is its error,
// replaced when the stream was cut meanwhile or is cut now for being too
// slow over the rate window that just ended.
func (d *dog) disarm(n int, err error) error {
	d.mu.Lock()
	d.timer.Stop()
	d.n += int64(n)
	if d.cutErr != nil {
		defer d.mu.Unlock()
		return d.cutErr
	}
	now := d.clk.Now()
	d.waited += now.Sub(d.armedAt)
	if span := d.waited - d.winWaited; d.minRate > 0 && span >= d.window {
		moved := d.n - d.winN
		if float64(moved) < float64(d.minRate)*span.Seconds() {
			c := d.cutLocked(ReasonTooSlow, now)
			cerr := d.cutErr
			d.mu.Unlock()
			d.l.cut(c)
			return cerr
		}
		d.winWaited, d.winN = d.waited, d.n
	}
	d.mu.Unlock()
	return err
}

func (d *dog) fire() {
	d.mu.Lock()
	if d.cutErr != nil {
		d.mu.Unlock()
		return
	}
	now := d.clk.Now()
	reason := ReasonStalled
	if !d.deadline.IsZero() && !now.Before(d.deadline) {
		reason = ReasonDeadline
	}
	c := d.cutLocked(reason, now)
	d.mu.Unlock()
	d.l.cut(c)
	if d.abort != nil {
		d.abort()
	}
}

// cutLocked marks the stream cut for reason and records the cut as the
// lock's last, before any call can see the stream cut; d.mu held (lock
// order: d.mu, then l.mu).
func (d *dog) cutLocked(reason string, now time.Time) (c Cut) {
	defer func() { d.l.record(c) }()
	c = Cut{What: d.what, Bytes: d.n, Idle: d.idle, At: now, Reason: reason}
	switch reason {
	case ReasonStalled:
		d.cutErr = fmt.Errorf("%w: %s: no bytes for %s (after %d)", ErrStalled, d.what, d.idle, d.n)
	case ReasonTooSlow:
		span := d.waited - d.winWaited
		c.Idle = span
		d.cutErr = fmt.Errorf("%w: %s: %d bytes in %s, under the minimum %d B/s (after %d)",
			ErrTooSlow, d.what, d.n-d.winN, span, d.minRate, d.n)
	case ReasonDeadline:
		c.Idle = now.Sub(d.began)
		d.cutErr = fmt.Errorf("%w: %s: not done within %s (after %d)", ErrDeadline, d.what, d.deadline.Sub(d.began), d.n)
	}
	return c
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
