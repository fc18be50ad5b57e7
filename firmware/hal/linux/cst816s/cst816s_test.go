package cst816s_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"periph.io/x/conn/v3/i2c/i2ctest"

	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/hal/linux/cst816s"
)

func noSleep(time.Duration) {}

// start is what New sends: the chip id read, auto sleep off.
var start = []i2ctest.IO{
	{Addr: 0x15, W: []byte{0xA7}, R: []byte{0xB5}},
	{Addr: 0x15, W: []byte{0xFE, 0x01}},
}

// read is one poll seeing fingers at (x, y).
func read(fingers byte, x, y int) i2ctest.IO {
	return i2ctest.IO{Addr: 0x15, W: []byte{0x01}, R: []byte{0, fingers, byte(x >> 8), byte(x), byte(y >> 8), byte(y)}}
}

// TestTouches replays a finger landing, moving and leaving: one down at
// the first position, one up at the last.
func TestTouches(t *testing.T) {
	ops := append(append([]i2ctest.IO{}, start...),
		read(0, 0, 0), read(1, 30, 200), read(1, 40, 190), read(1, 300, 5), read(0, 0, 0), read(0, 0, 0))
	pb := &i2ctest.Playback{Ops: ops, DontPanic: true}
	d, err := cst816s.New(pb, cst816s.DefaultAddress, cst816s.Options{Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if err := d.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if err := pb.Close(); err != nil {
		t.Error(err)
	}
	want := []hal.TouchEvent{{Down: true, X: 30, Y: 200}, {Down: false, X: 239, Y: 5}}
	var got []hal.TouchEvent
	for len(d.Events()) > 0 {
		got = append(got, <-d.Events())
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("events (-got +want)\n%s", diff)
	}
}

func TestNotFound(t *testing.T) {
	for _, ops := range [][]i2ctest.IO{
		{{Addr: 0x15, W: []byte{0xA7}, R: []byte{0x00}}}, // another chip
	} {
		pb := &i2ctest.Playback{Ops: ops, DontPanic: true}
		if _, err := cst816s.New(pb, cst816s.DefaultAddress, cst816s.Options{Sleep: noSleep}); !errors.Is(err, cst816s.ErrNotFound) {
			t.Errorf("%v: err %v, want ErrNotFound", ops, err)
		}
	}
	// Nothing on the bus: the playback refuses the transaction.
	pb := &i2ctest.Playback{DontPanic: true}
	if _, err := cst816s.New(pb, cst816s.DefaultAddress, cst816s.Options{Sleep: noSleep}); !errors.Is(err, cst816s.ErrNotFound) {
		t.Errorf("empty bus: %v, want ErrNotFound", err)
	}
}
