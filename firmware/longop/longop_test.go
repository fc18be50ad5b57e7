package longop

import (
	"errors"
	"testing"

	"github.com/holofleet/holofleet/firmware/api"
)

func TestOneAtATime(t *testing.T) {
	var l Lock
	rel, err := l.TryAcquire("file upload")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire("sha256"); !errors.Is(err, api.ErrBusy) {
		t.Fatalf("second acquire: %v, want busy", err)
	}
	if l.Holder() != "file upload" {
		t.Fatalf("holder %q", l.Holder())
	}
	rel()
	rel()
	rel2, err := l.TryAcquire("sha256")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	rel2()
	if l.Holder() != "" {
		t.Fatal("holder after release")
	}
}
