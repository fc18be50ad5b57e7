package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// The gate: before a pending board starts (before any byte is sent), the
// worker asks whether it may. A board busy with a show waits: a scene
// running to its end on it (GET /scenes active), the label show=live, or
// any ShowGuard of the engine (a cue list running on it, DMX input active
// on its patch: gateway/cue and gateway/dmx plug in here). A board that
// fails one of the plan's health conditions waits or, with Health.Skip,
// is skipped. Waiting and skipped boards never count as failures; a
// waiting board is asked again every Options.Recheck and its record
// (Board.Waiting) says what it waits for. Boards past pending are not
// held: an update started finishes.

// ShowGuard tells whether a board is busy with a show in a way the board
// itself does not report, such as a cue list running on it or DMX input
// active on its patch. Busy returns why the board must not be restarted
// now, or "" when it may; it must answer quickly (it is asked before
// every pending board starts, and again every Recheck while it waits).
type ShowGuard interface {
	Busy(ctx context.Context, board string) string
}

// LabelShow is the label an operator sets (show=live) to keep a board out
// of every rollout until it is removed.
const (
	LabelShow     = "show"
	LabelShowLive = "live"
)

// WaitLineBusy is what a pending board waits for (Board.Waiting) when it
// is reached only over an RS485 line whose wire timed sends keep (a show
// firing timed actions faster than a command's reply wait): the call was
// never sent (fleet.ErrLineBusy) and spends no retry.
const WaitLineBusy = "line: its RS485 line is busy with timed sends"

// DefaultRecheck is how often a waiting board is asked again.
const DefaultRecheck = 10 * time.Second

// Health are the conditions a board must meet before it starts. Zero
// values do not check.
type Health struct {
	// MinUptime: the board has been up (GET /info uptime_s) and online
	// for at least this long.
	MinUptime Duration `json:"min_uptime,omitempty"`
	// MaxLinkErrors is the highest ratio of host-link errors (errors,
	// bad_crc, bad_frames, overruns, timeouts) to frames and lines the
	// board's GET /link counters may show (0-1); boards without the link
	// feature pass.
	MaxLinkErrors float64 `json:"max_link_errors,omitempty"`
	// MinHeapFree is the least free memory (GET /info heap_free, bytes).
	MinHeapFree int64 `json:"min_heap_free,omitempty"`
	// ClockSynced: the gateway has measured the board's clock.
	ClockSynced bool `json:"clock_synced,omitempty"`
	// Skip skips a board that fails a condition (phase skipped, with
	// why) instead of waiting for it.
	Skip bool `json:"skip,omitempty"`
}

func (h *Health) check() []error {
	if h == nil {
		return nil
	}
	var errs []error
	if h.MinUptime < 0 || h.MinUptime.D() > 7*MaxTimeout {
		errs = append(errs, fmt.Errorf("health min_uptime %v outside 0-168h", h.MinUptime.D()))
	}
	if h.MaxLinkErrors < 0 || h.MaxLinkErrors > 1 || math.IsNaN(h.MaxLinkErrors) {
		errs = append(errs, fmt.Errorf("health max_link_errors %v outside 0-1", h.MaxLinkErrors))
	}
	if h.MinHeapFree < 0 {
		errs = append(errs, fmt.Errorf("health min_heap_free %d below 0", h.MinHeapFree))
	}
	return errs
}

// Verdict is the gate's answer for one board.
type Verdict struct {
	// Show says why the board is busy with a show ("" when it is not).
	Show string `json:"show,omitempty"`
	// Unhealthy says which health condition the board fails.
	Unhealthy string `json:"unhealthy,omitempty"`
	// Skip: the board is to be skipped (Health.Skip) rather than waited for.
	Skip bool `json:"skip,omitempty"`
}

// Why is what the board waits for (or why it is skipped).
func (v Verdict) Why() string {
	switch {
	case v.Show != "":
		return "show: " + v.Show
	case v.Unhealthy != "":
		return "health: " + v.Unhealthy
	}
	return ""
}

// errNotFound tells a board's 404 (an API area it does not serve).
var errNotFound = errors.New("not served")

// boardGet reads a board's JSON endpoint.
func (e *Engine) boardGet(ctx context.Context, id, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep, err := e.o.Fleet.Call(ctx, id, http.MethodGet, path, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errTransient, err)
	}
	if rep.Status == http.StatusNotFound {
		return errNotFound
	}
	if err := rep.Err(); err != nil {
		return fmt.Errorf("%w: %v", errTransient, err)
	}
	if err := json.Unmarshal(rep.Body, out); err != nil {
		return fmt.Errorf("%w: %v", fleet.ErrBadReply, err)
	}
	return nil
}

// gate decides whether board id may start now under plan p.
func (e *Engine) gate(ctx context.Context, p *Plan, id string) (Verdict, error) {
	var v Verdict
	views := e.o.Fleet.Boards(fleet.Filter{IDs: []string{id}})
	var view fleet.BoardView
	if len(views) == 1 {
		view = views[0]
	}
	if !p.IgnoreShow {
		if view.Labels[LabelShow] == LabelShowLive {
			v.Show = "labelled " + LabelShow + "=" + LabelShowLive
			return v, nil
		}
		var sc struct {
			Active *struct {
				Name string `json:"name"`
			} `json:"active"`
		}
		if err := e.boardGet(ctx, id, "/scenes", &sc); err != nil && !errors.Is(err, errNotFound) {
			return v, err
		}
		if sc.Active != nil {
			v.Show = fmt.Sprintf("scene %q is running on it", sc.Active.Name)
			return v, nil
		}
		for _, g := range e.o.ShowGuards {
			if why := g.Busy(ctx, id); why != "" {
				v.Show = why
				return v, nil
			}
		}
	}
	h := p.Health
	if h == nil {
		return v, nil
	}
	var why []string
	if h.MinUptime > 0 || h.MinHeapFree > 0 {
		var info struct {
			UptimeS  int64 `json:"uptime_s"`
			HeapFree int64 `json:"heap_free"`
		}
		if err := e.boardGet(ctx, id, "/info", &info); err != nil {
			return v, err
		}
		if up := time.Duration(info.UptimeS) * time.Second; h.MinUptime > 0 && up < h.MinUptime.D() {
			why = append(why, fmt.Sprintf("up %v, the plan asks %v", up, h.MinUptime.D()))
		}
		if h.MinHeapFree > 0 && info.HeapFree < h.MinHeapFree {
			why = append(why, fmt.Sprintf("%d bytes free, the plan asks %d", info.HeapFree, h.MinHeapFree))
		}
	}
	if h.MinUptime > 0 && !view.Online {
		why = append(why, "offline")
	}
	if h.MaxLinkErrors > 0 {
		var link struct {
			Counters boardapi.LinkCounters `json:"counters"`
		}
		err := e.boardGet(ctx, id, "/link", &link)
		if err != nil && !errors.Is(err, errNotFound) {
			return v, err
		}
		c := link.Counters
		bad := c.Errors + c.BadCRC + c.BadFrames + c.Overruns + c.Timeouts
		if total := c.Frames + c.Lines; err == nil && bad > 0 {
			ratio := float64(bad) / float64(max(total, 1))
			if ratio > h.MaxLinkErrors {
				why = append(why, fmt.Sprintf("link errors %.2g of frames, the plan allows %.2g", ratio, h.MaxLinkErrors))
			}
		}
	}
	if h.ClockSynced && view.Clock == nil {
		why = append(why, "clock not synced")
	}
	if len(why) > 0 {
		v.Unhealthy = strings.Join(why, "; ")
		v.Skip = h.Skip
	}
	return v, nil
}

// errHold ends a worker's turn for a board that waits at the gate.
var errHold = errors.New("rollout: held at the gate")

// hold records that b waits (why) and asks again after Recheck.
func (w *worker) hold(ctx context.Context, b *Board, why string) error {
	changed := b.Waiting != why
	b.Waiting = why
	b.NextTry = w.now().Add(w.e.o.Recheck).UTC()
	if changed {
		if err := w.e.save(ctx, w.r, b, "waiting: "+why); err != nil {
			return err
		}
	} else {
		w.e.mu.Lock()
		w.r.boards[b.Board] = b.clone()
		w.e.mu.Unlock()
	}
	return errHold
}
