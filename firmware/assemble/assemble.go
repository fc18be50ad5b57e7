// Package assemble wires the firmware's feature packages into a board: it
// is the one place that knows every feature, so holo-board (one board per
// process) and fleet mode (many boards in one process) install the same
// firmware. Each feature is a board.Feature run at every start; it builds
// its controller from the saved state, registers its routes, its part of
// the native status block, and the goroutines the boot owns.
package assemble

import (
	"context"
	"hash/fnv"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/hal/sim"
	"github.com/holofleet/holofleet/firmware/holo"
	"github.com/holofleet/holofleet/firmware/leds"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/firmware/simview"
)

// Options are the settings of the features that come from the command
// line rather than from the board's saved state.
type Options struct {
	// Port is the board's UART (or RS485 transceiver); nil when none.
	Port *link.Port
	// I2C is the simulated I2C bus the board sits on; nil when none.
	I2C *i2creg.Bus
	// NoI2CTarget, when set, says why the board can never be an I2C
	// target (the Linux HAL): the link refuses mode i2c with it.
	NoI2CTarget string
	// Network holds the network feature's command-line settings.
	Network NetworkOptions
	// VolumeSize is the storage volume's capacity (0: fs.DefaultCapacity).
	VolumeSize int64
	// Extra features appended after the built-in ones.
	Extra []board.Feature
}

// Features returns every feature of the firmware, in installation order.
// The link comes last so that every route it serves exists.
func Features(o Options) []board.Feature {
	fs := []board.Feature{LEDs, Holo, SimView, Network(o.Network), Console}
	fs = append(fs, Files(o.VolumeSize))
	fs = append(fs, o.Extra...)
	// The screen reads the storage volume and scenes drive the screen,
	// LEDs and holo.
	fs = append(fs, Screen, Scenes)
	link := Link(o.Port, o.I2C)
	if o.NoI2CTarget != "" {
		link = LinkWithout(o.Port, o.NoI2CTarget)
	}
	return append(fs, link)
}

// Link installs the host link on the board's port or I2C bus. A board on
// an I2C bus lists link-i2c in /info's extensions: it can be an I2C target.
func Link(port *link.Port, bus *i2creg.Bus) board.Feature { return linkFeature(port, bus, "") }

// LinkWithout installs the host link of a board that can never be an I2C
// target (why says why); PATCH /link refuses mode i2c.
func LinkWithout(port *link.Port, why string) board.Feature { return linkFeature(port, nil, why) }

func linkFeature(port *link.Port, bus *i2creg.Bus, noI2C string) board.Feature {
	return func(b *board.Boot) error {
		srv, err := link.New(link.Options{NoI2CTarget: noI2C,
			Port: port, I2C: bus, Lookup: b.HTTP.Lookup, Hub: b.Hub, Store: b.Board.DB().Bucket("link"),
			LEDGPIO: b.Board.Hardware().LEDGPIO, Status: b.StatusBlock, Version: b.App().Version,
			Uptime: b.Uptime, Attn: b.Board.Hardware().Attn, Clock: b.Clock, Log: b.Log.With("part", "link"),
		})
		if err != nil {
			return err
		}
		b.AddFeature("link", srv.Routes()...)
		if bus != nil {
			b.AddExtension(boardapi.ExtensionLinkI2C)
		}
		if err := srv.Start(); err != nil {
			return err
		}
		b.OnClose(srv.Stop)
		return nil
	}
}

// Keys under which features share their controllers through Boot.Value.
type (
	ledsKey struct{}
	holoKey struct{}
)

// LEDsOf returns the boot's LED controller.
func LEDsOf(b *board.Boot) *leds.Controller {
	c, _ := b.Value(ledsKey{}).(*leds.Controller)
	return c
}

// HoloOf returns the boot's holo controller.
func HoloOf(b *board.Boot) *holo.Controller {
	c, _ := b.Value(holoKey{}).(*holo.Controller)
	return c
}

func seed(b *board.Boot) uint64 {
	h := fnv.New64a()
	h.Write([]byte(b.Board.Identity().ID))
	return h.Sum64()
}

// LEDs installs the LED strip: count from the saved settings, brightness
// from the saved settings, animations run by the boot.
func LEDs(b *board.Boot) error {
	hw := b.Board.Hardware()
	st := b.Settings.Get()
	c, err := leds.New(leds.Options{Clock: b.Clock, Strip: hw.Strip, Count: st.LEDs.Count, GPIO: hw.LEDGPIO,
		Brightness: st.LEDs.Brightness, Publisher: b.Hub, Logger: b.Log.With("part", "leds"), Seed: seed(b)})
	if err != nil {
		return err
	}
	b.Set(ledsKey{}, c)
	b.Go(func(ctx context.Context) { _ = c.Run(ctx) })
	b.AddFeature("leds", c.Routes()...)
	b.AddStatus(func(sb *frame.StatusBlock) {
		s := c.State()
		sb.LEDs = frame.LEDMode(boardapi.LEDModeNumber(s.Mode))
		sb.Brightness = uint8(s.Brightness)
	})
	return nil
}

// Holo installs the holoprojector and its servos.
func Holo(b *board.Boot) error {
	hw := b.Board.Hardware()
	c, err := holo.New(holo.Options{Clock: b.Clock, Pan: hw.Pan, Tilt: hw.Tilt, Store: b.Board.DB().Bucket("holo"),
		Publisher: b.Hub, Logger: b.Log.With("part", "holo"), Seed: seed(b)})
	if err != nil {
		return err
	}
	b.Set(holoKey{}, c)
	b.Go(func(ctx context.Context) { _ = c.Run(ctx) })
	b.AddFeature("holo", c.Routes()...)
	b.AddStatus(func(sb *frame.StatusBlock) {
		s := c.State()
		sb.Holo = frame.HoloState(s.StatusCode())
		if s.Ready {
			sb.Flags |= frame.FlagHoloReady
		}
	})
	return nil
}

// SimView installs the simulator's extension endpoints when the board runs
// on simulated hardware.
func SimView(b *board.Boot) error {
	hw := b.Board.Hardware()
	d, okD := hw.Display.(*sim.Display)
	strip, okS := hw.Strip.(*sim.LEDStrip)
	pan, okP := hw.Pan.(*sim.Servo)
	tilt, okT := hw.Tilt.(*sim.Servo)
	if !okD || !okS || !okP || !okT {
		return nil
	}
	v := &simview.View{Screen: d, Strip: strip,
		Mode:   func() string { return LEDsOf(b).State().Mode },
		Servos: []simview.NamedServo{{ID: "pan", Servo: pan}, {ID: "tilt", Servo: tilt}}}
	b.AddFeature("", v.Routes()...)
	return nil
}
