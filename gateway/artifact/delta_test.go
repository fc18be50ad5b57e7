package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/holofleet/holofleet/bus/imagedelta"
)

// TestOpenDelta: the delta between two artifacts is made once, kept,
// rebuilds the target, and goes with either artifact; a base the store
// does not hold gives ErrNoDelta.
func TestOpenDelta(t *testing.T) {
	s := newStore(t, 1<<20)
	ctx := context.Background()
	base := testImage(t, "1.0.0", "holo-board", 200000)
	target := testImage(t, "1.0.1", "holo-board", 200000)
	for _, img := range [][]byte{base, target} {
		if _, _, err := s.Add(ctx, bytes.NewReader(img), "x.bin", ""); err != nil {
			t.Fatal(err)
		}
	}
	f, n, err := s.OpenDelta(ctx, hexSHA(base), hexSHA(target))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := io.ReadAll(f)
	f.Close()
	if int64(len(d)) != n || n > int64(len(target))/10 {
		t.Fatalf("delta of %d bytes (%d read) for %d", n, len(d), len(target))
	}
	got, err := imagedelta.Apply(base, d)
	if err != nil || !bytes.Equal(got, target) {
		t.Fatalf("apply: %v", err)
	}
	path := s.deltaPath(hexSHA(base), hexSHA(target))
	st1, _ := os.Stat(path)
	f, _, err = s.OpenDelta(ctx, hexSHA(base), hexSHA(target))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("the delta was made again")
	}
	unknown := testImage(t, "0.9.0", "holo-board", 1000)
	if _, _, err := s.OpenDelta(ctx, hexSHA(unknown), hexSHA(target)); !errors.Is(err, ErrNoDelta) {
		t.Fatalf("unknown base: %v", err)
	}
	if _, _, err := s.OpenDelta(ctx, hexSHA(target), hexSHA(target)); !errors.Is(err, ErrNoDelta) {
		t.Fatalf("base is target: %v", err)
	}
	if _, _, err := s.OpenDelta(ctx, "zz", hexSHA(target)); !errors.Is(err, ErrBadName) {
		t.Fatalf("bad sha: %v", err)
	}
	if err := s.Delete(hexSHA(base)); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(s.o.Dir, "delta-*")); len(m) != 0 {
		t.Fatalf("deltas left after the base was deleted: %v", m)
	}
}
