package auth

import (
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/holofleet/holofleet/gateway/fault"
)

// Limits keep one token (or one client without a token) from taking the
// gateway for itself: a rate of changing requests, and the watch streams
// (events, rollouts) it may hold open, per key and in total. A refusal
// says when to try again.

// ErrLimited: a rate or stream limit refused the request. Errors wrapping
// it are *LimitError, which carry the wait.
var ErrLimited = fault.New(fault.Busy, "auth: limit reached")

// LimitError is a refusal by a limit.
type LimitError struct {
	// What names the limit ("changing requests per token", ...).
	What string
	// RetryAfter is how long to wait before trying again.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: %s; retry after %v", ErrLimited, e.What, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrLimited) hold.
func (e *LimitError) Unwrap() error { return ErrLimited }

// Key is the limit key of an identity: the token's name; for the
// identities let in without a token (a lab, the demo's loopback), their
// name and the client's host, so each machine of a lab has its own.
func Key(id Identity, c Caller) string {
	if id.Token {
		return "token:" + id.Name
	}
	host := c.Addr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return id.Name + "@" + host
}

// RateLimiter is a token bucket per key: Rate requests a second on
// average, Burst at once. It is safe for concurrent use.
type RateLimiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds the keys kept; beyond it, full buckets (keys idle
// long enough to have refilled) are forgotten.
const maxBuckets = 4096

// NewRateLimiter allows rate requests a second per key with bursts of
// burst (at least 1). A rate of 0 or less allows everything. now is the
// clock (nil: time.Now).
func NewRateLimiter(rate float64, burst int, now func() time.Time) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{rate: rate, burst: math.Max(1, float64(burst)), now: now, buckets: map[string]*bucket{}}
}

// Allow takes one request from key's bucket, or returns a *LimitError
// saying when one will be there.
func (l *RateLimiter) Allow(key string) error {
	if l == nil || l.rate <= 0 {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.forgetFull(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return &LimitError{What: fmt.Sprintf("more than %g changing requests a second (burst %g)", l.rate, l.burst),
		RetryAfter: wait}
}

func (l *RateLimiter) refill(b *bucket, now time.Time) {
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = math.Min(l.burst, b.tokens+dt*l.rate)
	}
	b.at = now
}

func (l *RateLimiter) forgetFull(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// StreamLimiter counts open watch streams per key and in total.
type StreamLimiter struct {
	perKey, total int
	retry         time.Duration
	// keyName and poolName word refusals: "%d open streams for one
	// token", "%d open streams on the gateway".
	keyName, poolName string

	mu   sync.Mutex
	open map[string]int
	all  int
}

// StreamRetry is the wait a refused stream is told: a slot frees when
// another stream ends, which nobody can foresee.
const StreamRetry = 5 * time.Second

// NewStreamLimiter allows perKey streams per key and total in all; 0 or
// less means no limit of that kind.
func NewStreamLimiter(perKey, total int) *StreamLimiter {
	return NewNamedStreamLimiter(perKey, total, "streams for one token", "streams on the gateway")
}

// NewNamedStreamLimiter is NewStreamLimiter whose refusals name its
// streams: "%d open <keyName>", "%d open <poolName>".
func NewNamedStreamLimiter(perKey, total int, keyName, poolName string) *StreamLimiter {
	return &StreamLimiter{perKey: perKey, total: total, retry: StreamRetry, open: map[string]int{},
		keyName: keyName, poolName: poolName}
}

// Acquire counts one more stream of key, or returns a *LimitError. The
// release function (never nil) gives the slot back; calling it twice is
// harmless.
func (l *StreamLimiter) Acquire(key string) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perKey > 0 && l.open[key] >= l.perKey {
		return func() {}, &LimitError{What: fmt.Sprintf("%d open %s", l.perKey, l.keyName), RetryAfter: l.retry}
	}
	if l.total > 0 && l.all >= l.total {
		return func() {}, &LimitError{What: fmt.Sprintf("%d open %s", l.total, l.poolName), RetryAfter: l.retry}
	}
	l.open[key]++
	l.all++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.open[key]--
			if l.open[key] <= 0 {
				delete(l.open, key)
			}
			l.all--
		})
	}, nil
}

// Open returns how many streams key holds and how many are open in all.
func (l *StreamLimiter) Open(key string) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[key], l.all
}
