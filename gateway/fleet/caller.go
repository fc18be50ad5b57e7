package fleet

import (
	"context"
	"io"
)

// Caller is the fleet as an engine that changes boards uses it (a
// firmware rollout, an installation's apply): the boards, calls with a
// JSON body, and calls with a raw body of a known length (uploads).
// *Fleet is one.
type Caller interface {
	Boards(f Filter) []BoardView
	Call(ctx context.Context, id, method, path string, body []byte) (Reply, error)
	CallRaw(ctx context.Context, id, method, path, contentType string, body io.Reader, length int64) (Reply, error)
}

var _ Caller = (*Fleet)(nil)
