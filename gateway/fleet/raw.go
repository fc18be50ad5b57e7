package fleet

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
)

// RawCaller is a driver that sends raw request bodies of a known length
// (firmware and file uploads): the LAN driver.
type RawCaller interface {
	CallRaw(ctx context.Context, addr string, method, path, contentType string, body io.Reader, length int64) (Reply, error)
}

// CallRaw runs a request with a raw body (length bytes, -1 when unknown)
// on board id through the first transport that reaches it now and sends
// raw bodies (the LAN; RS485 lines carry JSON only). The reply is the
// board's, as for Call. Errors: ErrUnknownBoard, ErrUnreachable (no such
// transport reaches the board now) and the driver's. A body is read once,
// so a failed request is not tried on another transport.
func (f *Fleet) CallRaw(ctx context.Context, id, method, path, contentType string, body io.Reader, length int64) (Reply, error) {
	path, err := boardPath(path)
	if err != nil {
		return Reply{}, err
	}
	f.mu.Lock()
	b, ok := f.boards[id]
	if !ok {
		f.mu.Unlock()
		return Reply{}, fmt.Errorf("%w: %q", ErrUnknownBoard, id)
	}
	var rc RawCaller
	var addr string
	for _, ref := range sortedRefs(b) {
		if !b.refs[ref].online {
			continue
		}
		if d, ok := f.drivers[ref.Driver].(RawCaller); ok {
			rc, addr = d, ref.Addr
			break
		}
	}
	reason := b.reason
	f.mu.Unlock()
	if rc == nil {
		return Reply{}, fmt.Errorf("%w: board %s: no transport for raw bodies reaches it (%s)", ErrUnreachable, id, reason)
	}
	rep, err := rc.CallRaw(ctx, addr, method, path, contentType, body, length)
	if err != nil {
		return Reply{}, fmt.Errorf("board %s: %w", id, err)
	}
	return rep, nil
}

// sortedRefs lists b's places in a stable order.
func sortedRefs(b *boardState) []Ref {
	refs := make([]Ref, 0, len(b.refs))
	for ref := range b.refs {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b Ref) int { return cmp.Compare(a.String(), b.String()) })
	return refs
}
