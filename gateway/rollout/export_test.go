package rollout

import (
	"context"
	"io"

	"github.com/holofleet/holofleet/bus/clock"
)

// Limiter is the rollouts' token bucket, for benchmarks that send bytes
// under the same cap as a rollout.
type Limiter = limiter

// NewLimiter is newLimiter on the real clock.
func NewLimiter(bps int64) *Limiter { return newLimiter(clock.Real, bps) }

// Reader reads r through l, as a rollout's upload does.
func (l *limiter) Reader(ctx context.Context, r io.Reader) io.Reader {
	return &meteredReader{ctx: ctx, r: r, lim: l, count: func(int) {}}
}
