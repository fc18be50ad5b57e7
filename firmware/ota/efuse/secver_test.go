package efuse

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
)

// TestSecureVersion: the secure version lives in byte 7 (reserved and
// zero before), so a file written before anti-rollback reads as 0; it
// only goes up, survives a reload and stays within one byte.
func TestSecureVersion(t *testing.T) {
	old, _ := State{Keys: []image.KeyDigest{a}}.Encode() // byte 7 zero, as every older file
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), old[:], 0o644); err != nil {
		t.Fatal(err)
	}
	f := Open(dir)
	st, err := f.Read()
	if err != nil || st.SecureVersion != 0 || st.Trust().MinSecureVersion != 0 {
		t.Fatalf("old file: %+v %v", st, err)
	}
	for _, step := range []struct{ burn, want uint32 }{{2, 2}, {1, 2}, {2, 2}, {7, 7}, {255, 255}} {
		st, err := f.BurnSecureVersion(step.burn)
		if err != nil || st.SecureVersion != step.want {
			t.Fatalf("burn %d: %+v %v", step.burn, st, err)
		}
		again, err := Open(dir).Read()
		if err != nil || again.SecureVersion != step.want || len(again.Keys) != 1 || again.Trust().MinSecureVersion != step.want {
			t.Fatalf("reload after %d: %+v %v", step.burn, again, err)
		}
	}
	if _, err := f.BurnSecureVersion(256); !errors.Is(err, ErrSecureVersion) {
		t.Fatalf("256: %v", err)
	}
	// An open board (no keys) keeps a secure version too.
	open := Open(t.TempDir())
	if st, err := open.BurnSecureVersion(3); err != nil || st.SecureVersion != 3 || st.Enabled() {
		t.Fatalf("open board: %+v %v", st, err)
	}
}
