package rs485

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// oversized is a native request whose payload no frame carries.
type oversized struct{ n int }

func (oversized) Type() frame.Type { return frame.TypeScene }
func (o oversized) AppendBinary(b []byte) ([]byte, error) {
	return append(b, make([]byte, o.n)...), nil
}

// TestTooLargeIsTheCallers: a request the line cannot carry fails with
// fleet.ErrTooLarge naming the limit, before anything is queued (the line
// is not even running), on every path a caller reaches: a JSON line to
// one board or a group, a native request, a group frame.
func TestTooLargeIsTheCallers(t *testing.T) {
	l := New(Options{Name: "t"})
	ctx := context.Background()
	big := []byte(`{"name":"` + strings.Repeat("x", 20<<10) + `"}`)
	for name, err := range map[string]error{
		"call":       func() error { _, err := l.Call(ctx, "5", "POST", "/scenes/apply", big); return err }(),
		"group call": l.GroupCall(ctx, 3, "POST", "/scenes/apply", big),
		"native": func() error {
			_, _, err := l.Native(ctx, 5, oversized{frame.MaxPayload + 1})
			return err
		}(),
		"group frame": l.Group(ctx, 3, oversized{frame.MaxPayload + 1}),
	} {
		if !errors.Is(err, fleet.ErrTooLarge) {
			t.Errorf("%s: %v, want fleet.ErrTooLarge", name, err)
			continue
		}
		if errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v is also ErrBadRequest", name, err)
		}
		limit := "1024"
		if strings.Contains(name, "native") || strings.Contains(name, "frame") {
			limit = "48"
		}
		if !strings.Contains(err.Error(), limit) {
			t.Errorf("%s: %q does not name the limit %s", name, err, limit)
		}
	}
	// Just under the limit is not too large.
	fits := []byte(`{"name":"` + strings.Repeat("x", jsonline.MaxLine-100) + `"}`)
	if _, err := lineRequest(jsonline.Board(5), "POST", "/scenes/apply", fits); err != nil {
		t.Errorf("a line under the limit: %v", err)
	}
}
