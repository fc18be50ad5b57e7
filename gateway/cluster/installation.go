package cluster

// The installation as code in a cluster (gateway/installation's Shared):
//
//	KV holo_installation   rev.<%08d N>  revision N (signed), created by
//	                                     compare-and-set: only one gateway
//	                                     can store N
//	                       current       the current revision's number
//	KV holo_install_boards <board>       the owner's last finding on the
//	                                     board (signed)
//	object holo_content    <sha256>      content files, as holo_artifacts
//
// Records carry an HMAC under the cluster secret, as token records do: a
// revision written by an engine login alone (without the secret) would
// otherwise be applied to every board; such a record is refused and
// logged.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/installation"
)

// Names of the installation's records in the engine.
const (
	BucketInstallation = "holo_installation"
	BucketInstallState = "holo_install_boards"
	ObjectContent      = "holo_content"

	keyCurrent = "current"
	revPrefix  = "rev."

	sigRevision   = "holo-installation-revision"
	sigBoardState = "holo-installation-board"
)

// Installation keeps a cluster's installation as code: it implements
// installation.Shared. Make it with Cluster.Installation.
type Installation struct {
	c *Cluster

	mu sync.Mutex
	kv jetstream.KeyValue // revisions and current
	st jetstream.KeyValue // board findings
	// objs keeps the content files.
	objs *objects
}

var _ installation.Shared = (*Installation)(nil)

// Installation returns the cluster's store of the installation as code.
func (c *Cluster) Installation() *Installation {
	return &Installation{c: c, objs: &objects{c: c, bucket: ObjectContent,
		desc: "holo installation content by sha256", what: "content", keeps: "the installation's content",
		notFound: installation.ErrNotFound}}
}

// signed is a record with its signature.
type signed struct {
	Data json.RawMessage `json:"data"`
	Sig  string          `json:"sig"`
}

func (i *Installation) seal(purpose string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(signed{Data: data, Sig: mac(i.c.eng.Secret(), purpose, data)})
}

func (i *Installation) open(purpose, key string, raw []byte, v any) error {
	var s signed
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("cluster: record %s: %w", key, err)
	}
	if !goodMAC(i.c.eng.Secret(), purpose, s.Data, s.Sig) {
		i.c.log.Error("cluster: installation record not signed by a gateway of the cluster; ignored", "key", key)
		return fmt.Errorf("%w: %w: installation record %s", ErrUnsigned, installation.ErrInvalid, key)
	}
	return json.Unmarshal(s.Data, v)
}

// buckets returns the installation's buckets, creating them on first use.
func (i *Installation) buckets(ctx context.Context) (jetstream.KeyValue, jetstream.KeyValue, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.kv != nil {
		return i.kv, i.st, nil
	}
	if i.c.cutOff() {
		return nil, nil, fmt.Errorf("%w: the cluster keeps the installation", ErrPartitioned)
	}
	mk := func(name, desc string) (jetstream.KeyValue, error) {
		kv, err := i.c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Description: desc, History: 1,
			Replicas: i.c.eng.Replicas(), Storage: jetstream.FileStorage})
		if err != nil {
			return nil, fmt.Errorf("cluster: bucket %s: %w", name, err)
		}
		return kv, nil
	}
	kv, err := mk(BucketInstallation, "holo installation revisions")
	if err != nil {
		return nil, nil, err
	}
	st, err := mk(BucketInstallState, "holo installation findings by board")
	if err != nil {
		return nil, nil, err
	}
	i.kv, i.st = kv, st
	return kv, st, nil
}

func revisionKey(n int) string { return fmt.Sprintf("%s%08d", revPrefix, n) }

// Gateway implements installation.Shared.
func (i *Installation) Gateway() string { return i.c.name }

// Owns implements installation.Shared: whether this gateway owns board
// id (a board it reaches in standby is another's).
func (i *Installation) Owns(id string) bool {
	v, err := i.c.o.Local.Board(id)
	if err != nil {
		return false
	}
	return i.c.owns(v)
}

// CreateRevision implements installation.Shared: the revision's key is
// created only when absent (compare-and-set on "no value"), then
// current is raised to it (compare-and-set on current's revision, never
// lowered).
func (i *Installation) CreateRevision(ctx context.Context, r installation.Revision) error {
	kv, _, err := i.buckets(ctx)
	if err != nil {
		return err
	}
	raw, err := i.seal(sigRevision, r)
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, revisionKey(r.N), raw); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: revision %d was stored by another gateway meanwhile; plan again and apply", installation.ErrRevisionTaken, r.N)
		}
		return fmt.Errorf("cluster: storing revision %d: %w", r.N, err)
	}
	for {
		cur, rev, err := i.current(ctx, kv)
		if err != nil {
			return err
		}
		if cur >= r.N {
			return nil
		}
		val := []byte(strconv.Itoa(r.N))
		if rev == 0 {
			_, err = kv.Create(ctx, keyCurrent, val)
		} else {
			_, err = kv.Update(ctx, keyCurrent, val, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongLast(err) {
			return fmt.Errorf("cluster: making revision %d current: %w", r.N, err)
		}
	}
}

// isWrongLast reports a compare-and-set that lost.
func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// current reads current's value and its revision (0, 0 when absent).
func (i *Installation) current(ctx context.Context, kv jetstream.KeyValue) (int, uint64, error) {
	e, err := kv.Get(ctx, keyCurrent)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("cluster: reading the current revision: %w", err)
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil || n < 0 {
		return 0, 0, fmt.Errorf("cluster: the current revision is %q", e.Value())
	}
	return n, e.Revision(), nil
}

// Revision implements installation.Shared.
func (i *Installation) Revision(ctx context.Context, n int) (installation.Revision, error) {
	kv, _, err := i.buckets(ctx)
	if err != nil {
		return installation.Revision{}, err
	}
	e, err := kv.Get(ctx, revisionKey(n))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return installation.Revision{}, fmt.Errorf("%w: revision %d", installation.ErrNotFound, n)
	}
	if err != nil {
		return installation.Revision{}, fmt.Errorf("cluster: reading revision %d: %w", n, err)
	}
	var r installation.Revision
	if err := i.open(sigRevision, e.Key(), e.Value(), &r); err != nil {
		return installation.Revision{}, err
	}
	if r.N != n {
		return installation.Revision{}, fmt.Errorf("%w: record %s holds revision %d", ErrUnsigned, e.Key(), r.N)
	}
	return r, nil
}

// revisionNumbers lists the stored revisions' numbers, ascending.
func (i *Installation) revisionNumbers(ctx context.Context, kv jetstream.KeyValue) ([]int, error) {
	l, err := kv.ListKeysFiltered(ctx, revPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("cluster: listing revisions: %w", err)
	}
	defer l.Stop()
	var ns []int
	for k := range l.Keys() {
		if n, err := strconv.Atoi(strings.TrimPrefix(k, revPrefix)); err == nil {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns, nil
}

// Latest implements installation.Shared.
func (i *Installation) Latest(ctx context.Context) (int, int, error) {
	kv, _, err := i.buckets(ctx)
	if err != nil {
		return 0, 0, err
	}
	cur, _, err := i.current(ctx, kv)
	if err != nil {
		return 0, 0, err
	}
	ns, err := i.revisionNumbers(ctx, kv)
	if err != nil {
		return 0, 0, err
	}
	last := cur
	if len(ns) > 0 {
		last = max(last, ns[len(ns)-1])
	}
	return last, cur, nil
}

// History implements installation.Shared.
func (i *Installation) History(ctx context.Context) ([]installation.Revision, error) {
	kv, _, err := i.buckets(ctx)
	if err != nil {
		return nil, err
	}
	ns, err := i.revisionNumbers(ctx, kv)
	if err != nil {
		return nil, err
	}
	out := make([]installation.Revision, 0, len(ns))
	for _, n := range slices.Backward(ns) {
		r, err := i.Revision(ctx, n)
		if errors.Is(err, ErrUnsigned) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r.Description = nil
		out = append(out, r)
	}
	return out, nil
}

// WatchCurrent implements installation.Shared. It follows the bucket
// again after the engine was lost, and sends the value it reads first.
func (i *Installation) WatchCurrent(ctx context.Context) <-chan int {
	ch := make(chan int, 1)
	send := func(n int) {
		select {
		case <-ch: // a slow reader gets the latest
		default:
		}
		ch <- n
	}
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			i.watchCurrent(ctx, send)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // the engine is back within a second of reconnecting
			}
		}
	}()
	return ch
}

func (i *Installation) watchCurrent(ctx context.Context, send func(int)) {
	actx, cancel := context.WithTimeout(ctx, setupAttempt)
	kv, _, err := i.buckets(actx)
	cancel()
	if err != nil {
		return
	}
	w, err := kv.Watch(ctx, keyCurrent)
	if err != nil {
		i.c.log.Warn("cluster: watching the installation's current revision", "err", err)
		return
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if n, err := strconv.Atoi(string(e.Value())); err == nil && n > 0 {
				send(n)
			}
		}
	}
}

// PutBoard implements installation.Shared: the finding replaces the
// one kept only when it is newer (installation.BoardState.Newer), by
// compare-and-set on the record's revision, so that of two findings
// published out of order the newer stays.
func (i *Installation) PutBoard(ctx context.Context, s installation.BoardState) error {
	_, st, err := i.buckets(ctx)
	if err != nil {
		return err
	}
	raw, err := i.seal(sigBoardState, s)
	if err != nil {
		return err
	}
	k := key(s.Board)
	for {
		e, err := st.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = st.Create(ctx, k, raw)
		case err != nil:
			return fmt.Errorf("cluster: reading installation finding %s: %w", k, err)
		default:
			var kept installation.BoardState
			if i.open(sigBoardState, k, e.Value(), &kept) == nil && kept.Board == s.Board && !s.Newer(kept) {
				return nil // a newer finding is kept
			}
			_, err = st.Update(ctx, k, raw, e.Revision())
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongLast(err) {
			return fmt.Errorf("cluster: storing installation finding %s: %w", k, err)
		}
	}
}

// DropBoard implements installation.Shared.
func (i *Installation) DropBoard(ctx context.Context, board string) error {
	_, st, err := i.buckets(ctx)
	if err != nil {
		return err
	}
	if err := st.Delete(ctx, key(board)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return nil
}

// Boards implements installation.Shared: every gateway's findings, the
// records that no gateway signed left out.
func (i *Installation) Boards(ctx context.Context) ([]installation.BoardState, error) {
	_, st, err := i.buckets(ctx)
	if err != nil {
		return nil, err
	}
	l, err := st.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: listing installation findings: %w", err)
	}
	defer l.Stop()
	var out []installation.BoardState
	for k := range l.Keys() {
		e, err := st.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: reading installation finding %s: %w", k, err)
		}
		var s installation.BoardState
		if err := i.open(sigBoardState, k, e.Value(), &s); err != nil || key(s.Board) != k {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b installation.BoardState) int { return strings.Compare(a.Board, b.Board) })
	return out, nil
}

// ShareContent implements installation.Shared.
func (i *Installation) ShareContent(ctx context.Context, sha string, local *installation.Contents) error {
	return i.objs.share(ctx, sha, "", func() (*os.File, error) {
		f, _, err := local.Open(sha)
		return f, err
	})
}

// FetchContent implements installation.Shared: the bytes are checked
// against sha as they are kept (installation.Contents.Add), so a record
// changed in the engine is refused.
func (i *Installation) FetchContent(ctx context.Context, sha string, local *installation.Contents) error {
	have := func() bool { _, ok := local.Has(sha); return ok }
	return i.objs.fetch(ctx, sha, have, func(r io.Reader, _ string) error {
		_, _, err := local.Add(r, sha)
		return err
	})
}
