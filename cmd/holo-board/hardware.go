package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/holofleet/holofleet/bus/clock"
	"log/slog"

	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/hal/linux"
)

// HAL names --hal accepts.
const (
	halSim   = "sim"
	halLinux = "linux"
)

// NoI2CTarget is why a board on the Linux HAL is never an I2C target.
const NoI2CTarget = "Linux user space has no I2C target mode (i2c-dev is a controller); use uart or rs485"

// hardwareFlags are --hal and --hardware.
type hardwareFlags struct {
	hal  string
	file string
	ppm  float64
}

func newHardwareFlags(fs *flag.FlagSet) *hardwareFlags {
	h := &hardwareFlags{}
	fs.StringVar(&h.hal, "hal", halSim, "hardware: sim (simulated parts) or linux (real parts on a Linux board, described by --hardware)")
	fs.StringVar(&h.file, "hardware", "/etc/holo-board/hardware.json", "with --hal linux: the hardware description file (see docs/hardware.md)")
	fs.Float64Var(&h.ppm, "clock-ppm", 0, "with --hal sim: the simulated crystal runs this many parts per million fast (negative: slow), -1000 to 1000")
	return h
}

// check validates --hal and, for linux, reads and checks the description
// without touching hardware.
func (h *hardwareFlags) check() error {
	if h.ppm != 0 && (h.hal != halSim || !(h.ppm >= -clock.MaxSkewPPM && h.ppm <= clock.MaxSkewPPM)) {
		return fmt.Errorf("--clock-ppm: a simulated crystal (--hal sim) within ±%d ppm, not %v with --hal %s", clock.MaxSkewPPM, h.ppm, h.hal)
	}
	switch h.hal {
	case halSim:
		return nil
	case halLinux:
		if _, err := linux.Load(h.file); err != nil {
			return fmt.Errorf("--hardware: %w", err)
		}
		return nil
	}
	return fmt.Errorf("--hal: want %s or %s, not %q", halSim, halLinux, h.hal)
}

// clock is the board's clock: the host's, or with --clock-ppm a
// simulated crystal that far off.
func (h *hardwareFlags) clock() clock.Clock { return clock.Skewed(clock.Real, h.ppm) }

// open returns the board's hardware: nil for the simulator; for linux the
// described parts, opened through periph.io's host drivers, and what runs
// them (the touch controller's reading, the BOOT button pressing the
// current boot's button).
func (h *hardwareFlags) open(ctx context.Context, log *slog.Logger, current func() *board.Boot) (*board.Hardware, *linux.Devices, error) {
	switch h.hal {
	case halSim:
		return nil, nil, nil
	case halLinux:
	default:
		return nil, nil, fmt.Errorf("--hal: want %s or %s, not %q", halSim, halLinux, h.hal)
	}
	desc, err := linux.Load(h.file)
	if err != nil {
		return nil, nil, fmt.Errorf("--hardware: %w", err)
	}
	devs, err := linux.Open(desc, &linux.PeriphHost{}, linux.Options{Log: log.With("part", "hal")})
	if err != nil {
		return nil, nil, fmt.Errorf("--hardware %s: %w", h.file, err)
	}
	go devs.Run(ctx)
	if devs.Boot != nil {
		go devs.Boot.Run(ctx, func() {
			if b := current(); b != nil {
				if n := assemble.NetworkOf(b); n != nil {
					log.Info("BOOT button pressed: access point on")
					n.PressBoot()
				}
			}
		})
	}
	hw := &board.Hardware{Display: devs.Display, Touch: devs.Touch, Strip: devs.Strip, Pan: devs.Pan, Tilt: devs.Tilt,
		LEDGPIO: devs.LEDGPIO, Attn: devs.Attn}
	log.Info("hardware opened", "hal", h.hal, "description", h.file, "absent", devs.Absent)
	return hw, devs, nil
}
