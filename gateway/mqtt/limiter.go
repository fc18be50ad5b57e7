package mqtt

import (
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// maxBuckets bounds the limiter's memory: past it, full buckets are
// forgotten (a full bucket is the same as none).
const maxBuckets = 4096

// limiter holds token buckets per board (or group) and per command topic:
// a command passes when both have a token.
type limiter struct {
	clk               clock.Clock
	boardRate, tRate  float64
	burst             float64
	mu                sync.Mutex
	boards, topicsMap map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(clk clock.Clock, boardRate, topicRate float64, burst int) *limiter {
	return &limiter{clk: clk, boardRate: boardRate, tRate: topicRate, burst: float64(burst),
		boards: map[string]*bucket{}, topicsMap: map[string]*bucket{}}
}

// allow takes a token from the board's and the topic's buckets, or from
// neither.
func (l *limiter) allow(board, topic string) bool {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	bb := l.fill(l.boards, board, l.boardRate, now)
	tb := l.fill(l.topicsMap, topic, l.tRate, now)
	if bb.tokens < 1 || tb.tokens < 1 {
		return false
	}
	bb.tokens--
	tb.tokens--
	return true
}

func (l *limiter) fill(m map[string]*bucket, k string, rate float64, now time.Time) *bucket {
	b, ok := m[k]
	if !ok {
		if len(m) >= maxBuckets {
			for k2, b2 := range m {
				if b2.tokens+now.Sub(b2.at).Seconds()*rate >= l.burst {
					delete(m, k2)
				}
			}
		}
		b = &bucket{tokens: l.burst, at: now}
		m[k] = b
		return b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	return b
}
