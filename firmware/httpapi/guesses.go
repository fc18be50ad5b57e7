package httpapi

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

// Password guessing is slowed per client address. Every wrong password is
// a failure of its address; the first FreeFailures in a row are answered
// 401 at once. The failure that reaches FreeFailures, and each after it,
// locks the address for FirstLock, doubled at every further failure up to
// MaxLock. While locked, any request of that address that presents a
// password is answered 429 too_many_attempts with Retry-After (whole
// seconds, rounded up) and the password is not even checked; requests
// without one (open reads) are served as usual. The right password, once
// the lock is over, forgets the address's failures. An address with no
// failure for ForgetAfter is forgotten too.
//
// Memory is bounded: at most MaxTracked addresses are remembered, the
// least recently failing forgotten first. IPv6 addresses count per /64
// network, since one host is usually given a whole /64 to pick from.
//
// With the defaults one address gets 5 guesses at once, then one guess
// per lock: 1, 2, 4, 8, 16, 32 s, then one a minute, about 1,440 a day.
const (
	FreeFailures = 5
	FirstLock    = time.Second
	MaxLock      = time.Minute
	ForgetAfter  = 15 * time.Minute
	MaxTracked   = 256
)

// ErrTooManyAttempts is the reply to a password from an address that
// failed too often (the specification leaves rate limits open).
var ErrTooManyAttempts = &api.Error{Status: http.StatusTooManyRequests, Code: "too_many_attempts",
	Message: "too many wrong passwords from this address; wait Retry-After seconds"}

// guesses remembers the password failures of client addresses.
type guesses struct {
	clk clock.Clock
	max int

	mu    sync.Mutex
	order *list.List               // of *failures, most recent failure first
	byKey map[string]*list.Element // address key -> element of order
}

type failures struct {
	key   string
	count int
	last  time.Time // of the last failure
	until time.Time // locked until; zero when not locked
}

func newGuesses(clk clock.Clock, max int) *guesses {
	if max <= 0 {
		max = MaxTracked
	}
	return &guesses{clk: clk, max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// addressKey is the key a request's failures count under: the remote IP,
// or its /64 network for IPv6.
func addressKey(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// locked reports how long the address stays locked (0: not locked).
func (g *guesses) locked(key string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.byKey[key]
	if !ok {
		return 0
	}
	f := e.Value.(*failures)
	now := g.clk.Now()
	if now.Sub(f.last) >= ForgetAfter {
		g.forget(e)
		return 0
	}
	if left := f.until.Sub(now); left > 0 {
		return left
	}
	return 0
}

// failed counts a wrong password from the address.
func (g *guesses) failed(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clk.Now()
	e, ok := g.byKey[key]
	if ok && now.Sub(e.Value.(*failures).last) >= ForgetAfter {
		g.forget(e)
		ok = false
	}
	if !ok {
		for g.order.Len() >= g.max {
			g.forget(g.order.Back())
		}
		e = g.order.PushFront(&failures{key: key})
		g.byKey[key] = e
	}
	g.order.MoveToFront(e)
	f := e.Value.(*failures)
	f.count++
	f.last = now
	if f.count >= FreeFailures {
		f.until = now.Add(lockFor(f.count))
	}
}

// lockFor is the lock after the n-th failure in a row (n >= FreeFailures).
func lockFor(n int) time.Duration {
	d := FirstLock
	for i := FreeFailures; i < n && d < MaxLock; i++ {
		d *= 2
	}
	return min(d, MaxLock)
}

// succeeded forgets the address's failures.
func (g *guesses) succeeded(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.byKey[key]; ok {
		g.forget(e)
	}
}

func (g *guesses) forget(e *list.Element) {
	g.order.Remove(e)
	delete(g.byKey, e.Value.(*failures).key)
}

// tracked is how many addresses are remembered.
func (g *guesses) tracked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.order.Len()
}
