package rollout

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// limiter is a token bucket shared by a rollout's uploads: bytes per
// second with a burst of one second. A nil limiter does not limit.
type limiter struct {
	clk  clock.Clock
	rate float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newLimiter(clk clock.Clock, bps int64) *limiter {
	if bps <= 0 {
		return nil
	}
	return &limiter{clk: clk, rate: float64(bps), tokens: float64(bps), last: clk.Now()}
}

// wait takes n bytes' worth of tokens, sleeping until they exist.
func (l *limiter) wait(ctx context.Context, n int) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	now := l.clk.Now()
	l.tokens = min(l.rate, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens -= float64(n)
	var d time.Duration
	if l.tokens < 0 {
		d = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if d == 0 {
		return nil
	}
	return clock.Sleep(ctx, l.clk, d)
}

// meteredReader reads through the limiter in chunks and counts bytes.
type meteredReader struct {
	ctx   context.Context
	r     io.Reader
	lim   *limiter
	count func(int)
}

const meterChunk = 32 << 10

func (m *meteredReader) Read(p []byte) (int, error) {
	if len(p) > meterChunk {
		p = p[:meterChunk]
	}
	if err := m.lim.wait(m.ctx, len(p)); err != nil {
		return 0, err
	}
	n, err := m.r.Read(p)
	if n > 0 {
		m.count(n)
	}
	return n, err
}
