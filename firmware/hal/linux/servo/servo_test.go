package servo_test

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"periph.io/x/conn/v3/i2c/i2ctest"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal/linux/servo"
	"github.com/holofleet/holofleet/firmware/hal/linux/servo/pca9685test"
)

var update = flag.Bool("update", false, "rewrite the golden recordings in testdata/")

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// moves is the sequence the golden recording holds: pan and tilt driven,
// tilt moved, pan released, pan driven again.
func moves(pan, tilt *servo.Servo) error {
	for _, step := range []func() error{
		func() error { return pan.Drive(1500) },
		func() error { return tilt.Drive(1000) },
		func() error { return tilt.Drive(2000) },
		func() error { return pan.Release() },
		func() error { return pan.Drive(500) },
		func() error { return tilt.Drive(2500) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func transcript(ops []i2ctest.IO) string {
	var sb strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&sb, "%02x W %s", op.Addr, hex.EncodeToString(op.W))
		if len(op.R) > 0 {
			fmt.Fprintf(&sb, " R %s", hex.EncodeToString(op.R))
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func parse(t *testing.T, s string) []i2ctest.IO {
	var ops []i2ctest.IO
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var op i2ctest.IO
		f := strings.Fields(line)
		if _, err := fmt.Sscanf(f[0], "%x", &op.Addr); err != nil {
			t.Fatal(err)
		}
		var err error
		if op.W, err = hex.DecodeString(f[2]); err != nil {
			t.Fatal(err)
		}
		if len(f) == 5 {
			if op.R, err = hex.DecodeString(f[4]); err != nil {
				t.Fatal(err)
			}
		}
		ops = append(ops, op)
	}
	return ops
}

// TestMovesAsRegisterWrites records the chip's start and a sequence of
// servo moves as I2C transactions (golden), reads the pulses back from the
// register model, then replays the recording through periph's
// i2ctest.Playback: the driver makes exactly those transactions.
func TestMovesAsRegisterWrites(t *testing.T) {
	chip := pca9685test.New(servo.DefaultAddress)
	rec := &i2ctest.Record{Bus: chip}
	c, err := servo.NewChip(rec, servo.DefaultAddress)
	if err != nil {
		t.Fatal(err)
	}
	if chip.Asleep() || chip.Prescale() != servo.Prescale {
		t.Fatalf("after start: asleep %v prescale %d, want awake %d", chip.Asleep(), chip.Prescale(), servo.Prescale)
	}
	clk := clock.NewFake(t0)
	pan, _ := c.Servo(0, clk)
	tilt, _ := c.Servo(1, clk)
	if err := moves(pan, tilt); err != nil {
		t.Fatal(err)
	}
	got := transcript(rec.Ops)
	if *update {
		if err := os.WriteFile("testdata/moves.golden", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/moves.golden")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, string(want)); diff != "" {
		t.Errorf("transactions (-got +want)\n%s", diff)
	}
	for ch, w := range map[int]int{0: 500, 1: 2500} {
		if us, on := chip.Micros(ch); !on || abs(us-w) > 3 {
			t.Errorf("channel %d: %d µs on %v, want %d", ch, us, on, w)
		}
	}

	pb := &i2ctest.Playback{Ops: parse(t, string(want)), DontPanic: true}
	c2, err := servo.NewChip(pb, servo.DefaultAddress)
	if err != nil {
		t.Fatal(err)
	}
	pan2, _ := c2.Servo(0, clk)
	tilt2, _ := c2.Servo(1, clk)
	if err := moves(pan2, tilt2); err != nil {
		t.Fatal(err)
	}
	if err := pb.Close(); err != nil {
		t.Error(err)
	}
}

func abs(v int) int { return max(v, -v) }

// TestPulses: pulse widths as the chip outputs them, within half a tick.
func TestPulses(t *testing.T) {
	chip := pca9685test.New(0x41)
	c, err := servo.NewChip(chip, 0x41)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	s, _ := c.Servo(15, clk)
	if _, on := chip.Micros(15); on {
		t.Fatal("a channel pulses before any Drive")
	}
	for _, us := range []int{500, 501, 999, 1000, 1500, 1723, 2000, 2499, 2500} {
		if err := s.Drive(us); err != nil {
			t.Fatal(err)
		}
		got, on := chip.Micros(15)
		if !on || abs(got-us) > 3 {
			t.Errorf("Drive(%d): chip sends %d µs (on %v)", us, got, on)
		}
		if servo.Micros(servo.Ticks(us)) != got {
			t.Errorf("Drive(%d): Micros(Ticks) = %d, chip %d", us, servo.Micros(servo.Ticks(us)), got)
		}
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if _, on := chip.Micros(15); on {
		t.Error("released channel still pulses")
	}
	if _, driven := s.Position(); driven {
		t.Error("released servo reports driven")
	}
}

func TestErrors(t *testing.T) {
	chip := pca9685test.New(0x40)
	if _, err := servo.NewChip(chip, 0x41); !errors.Is(err, servo.ErrBus) {
		t.Errorf("no chip at 0x41: %v, want ErrBus", err)
	}
	c, err := servo.NewChip(chip, 0x40)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	for _, ch := range []int{-1, 16} {
		if _, err := c.Servo(ch, clk); !errors.Is(err, servo.ErrRange) {
			t.Errorf("channel %d: %v", ch, err)
		}
	}
	s, _ := c.Servo(3, clk)
	for _, us := range []int{0, 499, 2501} {
		if err := s.Drive(us); !errors.Is(err, servo.ErrRange) {
			t.Errorf("Drive(%d): %v", us, err)
		}
	}
	if _, on := chip.Micros(3); on {
		t.Error("a refused pulse reached the chip")
	}
}

// FuzzTicks: every pulse in range goes out within half a tick of itself.
func FuzzTicks(f *testing.F) {
	f.Add(500)
	f.Add(1500)
	f.Add(2500)
	f.Fuzz(func(t *testing.T, us int) {
		if us < servo.MinPulse || us > servo.MaxPulse {
			return
		}
		tick := float64(servo.Prescale+1) / 25
		if d := float64(servo.Micros(servo.Ticks(us)) - us); d > tick/2+1 || d < -tick/2-1 {
			t.Fatalf("%d µs goes out as %d", us, servo.Micros(servo.Ticks(us)))
		}
	})
}

func TestLimits(t *testing.T) {
	chip := pca9685test.New(0x40)
	c, err := servo.NewChip(chip, 0x40)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Servo(0, clock.NewFake(t0))
	if err := s.SetLimits(900, 2100); err != nil {
		t.Fatal(err)
	}
	if err := s.Drive(800); !errors.Is(err, servo.ErrRange) {
		t.Errorf("800 µs under a 900 limit: %v", err)
	}
	if err := s.Drive(2100); err != nil {
		t.Error(err)
	}
	for _, l := range [][2]int{{400, 2000}, {1000, 2600}, {1500, 1500}} {
		if err := s.SetLimits(l[0], l[1]); !errors.Is(err, servo.ErrRange) {
			t.Errorf("SetLimits%v: %v", l, err)
		}
	}
}
