package artifact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/holofleet/holofleet/bus/imagedelta"
)

// Deltas: the store makes the delta image (bus/imagedelta) from one of
// its artifacts to another the first time a rollout asks for it (a board
// runs that base), and keeps it beside the artifacts as
// delta-<base>-<target>.bin until either artifact is deleted. A delta is
// checked by applying it once before it is kept. Only a base the store
// holds can be a delta's base: a board running an image the gateway never
// had gets the whole image.

// ErrNoDelta: no delta is worth sending from that base (the base is not
// in the store, or the delta would not be smaller than the image).
var ErrNoDelta = errors.New("artifact: no delta from that base")

func (s *Store) deltaPath(base, target string) string {
	return filepath.Join(s.o.Dir, "delta-"+base+"-"+target+".bin")
}

// deltaLocks serialises the making of one delta.
type deltaLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

func (d *deltaLocks) lock(key string) func() {
	d.mu.Lock()
	if d.m == nil {
		d.m = map[string]*sync.Mutex{}
	}
	l, ok := d.m[key]
	if !ok {
		l = &sync.Mutex{}
		d.m[key] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// OpenDelta opens the delta from artifact base to artifact target, making
// it on first use; it returns the file (the caller closes it) and its
// size. ErrNoDelta when there is none worth sending.
func (s *Store) OpenDelta(ctx context.Context, base, target string) (*os.File, int64, error) {
	var err error
	if base, err = CheckSHA(base); err != nil {
		return nil, 0, err
	}
	if target, err = CheckSHA(target); err != nil {
		return nil, 0, err
	}
	if base == target {
		return nil, 0, fmt.Errorf("%w: the base is the target", ErrNoDelta)
	}
	ta, err := s.Get(target)
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.Get(base); err != nil {
		return nil, 0, fmt.Errorf("%w: base %s is not in the store", ErrNoDelta, base)
	}
	path := s.deltaPath(base, target)
	unlock := s.deltas.lock(base + target)
	defer unlock()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := s.makeDelta(ctx, base, target, path); err != nil {
			return nil, 0, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("artifact: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if fi.Size() >= ta.Size {
		f.Close()
		return nil, 0, fmt.Errorf("%w: the delta (%d bytes) is not smaller than the image (%d)", ErrNoDelta, fi.Size(), ta.Size)
	}
	return f, fi.Size(), nil
}

// DeltaPath is where the artifact handler serves the delta from base to
// target, under its prefix.
func DeltaPath(base, target string) string { return "deltas/" + base + "/" + target + ".bin" }

// MadeDelta opens the delta from base to target if it has been made
// (OpenDelta makes it); ErrNoDelta when it has not, or is not worth
// sending.
func (s *Store) MadeDelta(base, target string) (*os.File, int64, error) {
	var err error
	if base, err = CheckSHA(base); err != nil {
		return nil, 0, err
	}
	if target, err = CheckSHA(target); err != nil {
		return nil, 0, err
	}
	ta, err := s.Get(target)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(s.deltaPath(base, target))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: no delta made from %s to %s", ErrNoDelta, base, target)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() >= ta.Size {
		f.Close()
		return nil, 0, fmt.Errorf("%w: no delta worth sending from %s to %s", ErrNoDelta, base, target)
	}
	return f, fi.Size(), nil
}

func (s *Store) makeDelta(ctx context.Context, base, target, path string) error {
	b, err := os.ReadFile(s.path(base))
	if err != nil {
		return fmt.Errorf("%w: base %s: %v", ErrNoDelta, base, err)
	}
	t, err := os.ReadFile(s.path(target))
	if err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := imagedelta.Make(b, t)
	if err != nil {
		return fmt.Errorf("artifact: making the delta: %w", err)
	}
	if _, err := imagedelta.Apply(b, d); err != nil {
		return fmt.Errorf("artifact: the delta does not rebuild the image: %w", err)
	}
	tmp, err := os.CreateTemp(s.o.Dir, "upload-*.tmp")
	if err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(d); err != nil {
		tmp.Close()
		return fmt.Errorf("artifact: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("artifact: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	syncDir(s.o.Dir)
	return nil
}

// dropDeltas removes the deltas from or to sha.
func (s *Store) dropDeltas(sha string) {
	for _, pat := range []string{"delta-" + sha + "-*.bin", "delta-*-" + sha + ".bin"} {
		m, _ := filepath.Glob(filepath.Join(s.o.Dir, pat))
		for _, p := range m {
			os.Remove(p)
		}
	}
}
