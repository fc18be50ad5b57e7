package installation_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/gateway/installation"
)

// memShared is a cluster's installation store in memory, for tests that
// must choose the order in which a gateway hears of things: the test
// sends the current revision on watch itself (unbuffered, so a send
// returns once the gateway's follower took it, and the next send once it
// has dealt with the one before). Other gateways' revisions are put in
// with store.
type memShared struct {
	name  string
	watch chan int

	mu       sync.Mutex
	revs     map[int]installation.Revision
	current  int
	boards   map[string]installation.BoardState
	creating func(installation.Revision) error // a test's say before a create
}

func newMemShared(name string) *memShared {
	return &memShared{name: name, watch: make(chan int), revs: map[int]installation.Revision{},
		boards: map[string]installation.BoardState{}}
}

// store puts revision r in as another gateway would and makes it
// current, without telling the watch.
func (m *memShared) store(r installation.Revision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revs[r.N] = r
	m.current = max(m.current, r.N)
}

func (m *memShared) Gateway() string     { return m.name }
func (m *memShared) Owns(id string) bool { return true }

func (m *memShared) CreateRevision(_ context.Context, r installation.Revision) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creating != nil {
		if err := m.creating(r); err != nil {
			return err
		}
	}
	if _, ok := m.revs[r.N]; ok {
		return fmt.Errorf("%w: revision %d", installation.ErrRevisionTaken, r.N)
	}
	m.revs[r.N] = r
	m.current = max(m.current, r.N)
	return nil
}

func (m *memShared) Revision(_ context.Context, n int) (installation.Revision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.revs[n]
	if !ok {
		return installation.Revision{}, fmt.Errorf("%w: revision %d", installation.ErrNotFound, n)
	}
	return r, nil
}

func (m *memShared) Latest(context.Context) (int, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := m.current
	for n := range m.revs {
		last = max(last, n)
	}
	return last, m.current, nil
}

func (m *memShared) History(context.Context) ([]installation.Revision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []installation.Revision
	for _, n := range slices.Backward(slices.Sorted(maps.Keys(m.revs))) {
		r := m.revs[n]
		r.Description = nil
		out = append(out, r)
	}
	return out, nil
}

func (m *memShared) WatchCurrent(context.Context) <-chan int { return m.watch }

func (m *memShared) PutBoard(_ context.Context, s installation.BoardState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.boards[s.Board] = s
	return nil
}

func (m *memShared) DropBoard(_ context.Context, board string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.boards, board)
	return nil
}

func (m *memShared) Boards(context.Context) ([]installation.BoardState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.boards))
	slices.SortFunc(out, func(a, b installation.BoardState) int { return strings.Compare(a.Board, b.Board) })
	return out, nil
}

// Content stays in the gateway's own store: every test's content is
// loaded there.
func (m *memShared) ShareContent(context.Context, string, *installation.Contents) error { return nil }

func (m *memShared) FetchContent(_ context.Context, sha string, local *installation.Contents) error {
	if _, ok := local.Has(sha); ok {
		return nil
	}
	return fmt.Errorf("%w: content %s", installation.ErrNotFound, sha)
}

// A cluster of one: no other gateway to ask.
func (m *memShared) PlanOthers(context.Context, []byte) ([]installation.BoardPlan, error) {
	return nil, nil
}
func (m *memShared) ExportOthers(context.Context) ([][]byte, []string, error) { return nil, nil, nil }
func (m *memShared) Serve(installation.Local)                                 {}
