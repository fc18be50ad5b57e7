package leds

import (
	"context"
	"fmt"
	"image/color"
	"log/slog"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Defaults of a new controller.
const (
	DefaultBrightness = 30 // percent: safe when the board powers the strip
	MaxCount          = boardapi.MaxLEDCount
)

// DefaultColour is the colour before any is set: white.
var DefaultColour = color.RGBA{0xff, 0xff, 0xff, 0xff}

// State is the strip's now-state, as GET /leds returns it.
type State struct {
	Mode       string `json:"mode"`
	Colour     string `json:"colour"` // #rrggbb
	Loop       bool   `json:"loop"`
	Brightness int    `json:"brightness"` // percent, 1-100
	Count      int    `json:"count"`      // LEDs on the strip
	GPIO       int    `json:"gpio"`       // data pin
}

// The body of PATCH /leds (and the leds part of a scene) and its rules are
// boardapi.LEDPatch: the gateway checks an LED change as the board does.

// Publisher receives state changes; the board's event hub implements it.
type Publisher interface{ SetState(kind string, state any) }

// Kind is the event kind of the strip's state.
const Kind = "leds"

// Options configure a Controller.
type Options struct {
	Clock clock.Clock  // required
	Strip hal.LEDStrip // required
	// Count and GPIO come from the settings at start; New configures
	// the strip with them.
	Count, GPIO int
	// Brightness is the saved leds.brightness applied at start;
	// 0 means DefaultBrightness.
	Brightness int
	Publisher  Publisher    // may be nil
	Logger     *slog.Logger // may be nil
	// Seed varies the flicker pattern between boards; any value.
	Seed uint64
}

// Controller owns the strip. Its methods are safe for concurrent use; Run
// plays the animations and must be running for them to move.
type Controller struct {
	clk   clock.Clock
	strip hal.LEDStrip
	pub   Publisher
	log   *slog.Logger
	seed  uint64
	count int
	gpio  int

	pubMu sync.Mutex // orders publications

	mu       sync.Mutex
	look     look
	start    time.Time // when the animation started
	px       []color.RGBA
	ticker   clock.Ticker
	active   bool      // the frame ticker runs
	rendered time.Time // time of the last frame rendered
	notify   chan struct{}
}

// New configures the strip and returns a controller with the strip off.
func New(o Options) (*Controller, error) {
	if o.Clock == nil || o.Strip == nil {
		return nil, fmt.Errorf("%w: clock and strip are required", ErrConfig)
	}
	if o.Count < 0 || o.Count > MaxCount {
		return nil, fmt.Errorf("%w: count %d not in 0-%d", ErrConfig, o.Count, MaxCount)
	}
	b := o.Brightness
	if b == 0 {
		b = DefaultBrightness
	}
	if b < 1 || b > 100 {
		return nil, fmt.Errorf("%w: brightness %d not in 1-100", ErrConfig, b)
	}
	if err := o.Strip.Configure(o.Count, o.GPIO); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		clk: o.Clock, strip: o.Strip, pub: o.Publisher, log: log, seed: o.Seed,
		count: o.Count, gpio: o.GPIO,
		look:   look{mode: boardapi.LEDModeOff, colour: DefaultColour, brightness: b},
		px:     make([]color.RGBA, o.Count),
		notify: make(chan struct{}),
	}
	c.ticker = o.Clock.NewTicker(FrameInterval)
	c.ticker.Stop()
	c.mu.Lock()
	c.startLocked()
	c.mu.Unlock()
	return c, nil
}

// Run plays animations until ctx ends. Call it once, in its own goroutine.
func (c *Controller) Run(ctx context.Context) error {
	defer c.ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ticker.C():
			c.mu.Lock()
			if c.active {
				c.frameLocked()
			}
			c.mu.Unlock()
		}
	}
}

// State returns the strip's state now.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateLocked()
}

func (c *Controller) stateLocked() State {
	return State{
		Mode: c.look.mode, Colour: boardapi.FormatColour(c.look.colour), Loop: c.look.loop,
		Brightness: c.look.brightness, Count: c.count, GPIO: c.gpio,
	}
}

// Patch validates p whole, then applies it: the reply is the new state.
// On error nothing changes; the error is an *api.Error (bad_request) that
// also matches boardapi.ErrLEDMode, boardapi.ErrColour or boardapi.ErrBrightness. A change of mode,
// colour or loop starts the animation again; a change of brightness alone
// does not.
func (c *Controller) Patch(p boardapi.LEDPatch) (State, error) {
	if err := p.Check(); err != nil {
		return State{}, err
	}
	c.mu.Lock()
	next := c.look
	if p.Mode != nil {
		next.mode = *p.Mode
	}
	if p.Colour != nil {
		next.colour, _ = boardapi.ParseColour(*p.Colour)
	}
	if p.Loop != nil {
		next.loop = *p.Loop
	}
	if p.Brightness != nil {
		next.brightness = *p.Brightness
	}
	restart := next.mode != c.look.mode || next.colour != c.look.colour || next.loop != c.look.loop
	changed := next != c.look
	c.look = next
	if restart {
		c.startLocked()
	} else if changed {
		c.frameLocked()
	}
	st := c.stateLocked()
	c.mu.Unlock()
	if changed {
		c.publish()
	}
	return st, nil
}

// Off turns the strip dark (mode off), keeping colour, loop and
// brightness.
func (c *Controller) Off() State {
	m := boardapi.LEDModeOff
	st, _ := c.Patch(boardapi.LEDPatch{Mode: &m})
	return st
}

// Snapshot returns what the strip does now, for Restore (a scene with
// then=restore keeps it while the scene runs).
func (c *Controller) Snapshot() State { return c.State() }

// Restore puts the strip back to a Snapshot; its animation starts again.
// Count and GPIO of the snapshot are ignored.
func (c *Controller) Restore(s State) error {
	_, err := c.Patch(boardapi.LEDPatch{Mode: &s.Mode, Colour: &s.Colour, Loop: &s.Loop, Brightness: &s.Brightness})
	return err
}

// startLocked (re)starts the animation from now and arms the ticker when
// the picture moves.
func (c *Controller) startLocked() {
	c.start = c.clk.Now()
	c.frameLocked()
	if c.active {
		c.ticker.Reset(FrameInterval)
	}
}

// frameLocked renders and writes the frame for now, and stops the ticker
// once the picture is still.
func (c *Controller) frameLocked() {
	now := c.clk.Now()
	still := c.look.render(c.px, now.Sub(c.start), c.seed)
	if err := c.strip.Write(c.px); err != nil {
		c.log.Warn("leds: write failed", "err", err)
	}
	if still {
		if c.active {
			c.ticker.Stop()
		}
		c.active = false
	} else {
		c.active = true
	}
	c.rendered = now
	close(c.notify)
	c.notify = make(chan struct{})
}

func (c *Controller) publish() {
	if c.pub == nil {
		return
	}
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	c.pub.SetState(Kind, c.State())
}
