package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"
)

// gate is a Batcher that holds every transaction until released and
// records what each wrote.
type gate struct {
	mu      sync.Mutex
	batches []map[string]any
	entered chan struct{}
	release chan struct{}
	err     error
}

func (g *gate) Batch(kv map[string]any) error {
	g.entered <- struct{}{}
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	g.batches = append(g.batches, maps.Clone(kv))
	return g.err
}

// TestJournalGroupCommit: writers that arrive while a transaction is
// being written go together in the next one, each told only once its
// records are written; a key queued twice keeps the later value.
func TestJournalGroupCommit(t *testing.T) {
	g := &gate{entered: make(chan struct{}, 8), release: make(chan struct{})}
	j := NewJournal(g)
	first := j.Add(map[string]any{"a": 1})
	<-g.entered // the first transaction is being written
	var later []<-chan error
	for i := range 10 {
		later = append(later, j.Add(map[string]any{fmt.Sprint("k", i): i, "a": 2 + i}))
	}
	for _, c := range later {
		select {
		case err := <-c:
			t.Fatalf("a writer was told %v before its transaction was written", err)
		default:
		}
	}
	g.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-g.entered // the second holds all ten
	g.release <- struct{}{}
	for _, c := range later {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.batches) != 2 || len(g.batches[1]) != 11 || g.batches[1]["a"] != 11 {
		t.Fatalf("transactions %v, want the first and one of the other ten writers with a = 11", g.batches)
	}
}

// TestJournalErrorAndContext: a failed transaction's error reaches its
// writers; a writer whose context ends stops waiting with its error.
func TestJournalErrorAndContext(t *testing.T) {
	boom := errors.New("disk full")
	g := &gate{entered: make(chan struct{}, 8), release: make(chan struct{}), err: boom}
	j := NewJournal(g)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- j.Write(ctx, map[string]any{"a": 1}) }()
	<-g.entered
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write after its context ended: %v", err)
	}
	g.release <- struct{}{}
	c := j.Add(map[string]any{"b": 1})
	<-g.entered
	g.release <- struct{}{}
	if err := <-c; !errors.Is(err, boom) {
		t.Fatalf("Add of a failed transaction: %v", err)
	}
}

// TestJournalOnBucket: many writers at once on a real store file, every
// record there afterwards.
func TestJournalOnBucket(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bk := db.Bucket("j")
	j := NewJournal(bk)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := j.Write(context.Background(), map[string]any{fmt.Sprint("k", i): i}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range 50 {
		var v int
		if ok, err := bk.Get(fmt.Sprint("k", i), &v); !ok || err != nil || v != i {
			t.Fatalf("k%d: %v %v %d", i, ok, err, v)
		}
	}
}
