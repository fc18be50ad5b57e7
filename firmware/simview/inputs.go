package simview

// The simulator's physical inputs, an extension like the rest of this
// package (real boards have buttons and glass, not endpoints):
//
//	POST /sim/boot   press the BOOT button (the access point comes on
//	                 for five minutes); 204
//	POST /sim/touch  {"action": "down"|"up", "x": 0-239, "y": 0-239}:
//	                 a finger on or off the glass, delivered on the touch
//	                 controller's channel as the hardware would; 204 once
//	                 the firmware took it (at most TouchTakeWait)
//	POST /sim/power  pull the power: 202, then PowerCutDelay later the
//	                 board stops dead (what that means is the Power
//	                 function's business; holo-board exits at once)
//
// They are served over HTTP only, never over the host link, and they obey
// the board's rules for changing requests (Host, password, JSON body).

import (
	"net/http"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal"
)

// PowerCutDelay is how long after the reply to POST /sim/power the power
// is cut, so the caller learns that it was heard.
const PowerCutDelay = 100 * time.Millisecond

// Toucher injects touches (sim.Display has it).
type Toucher interface{ Touch(down bool, x, y int) }

// queued is a touch controller that tells how many touches wait unread.
type queued interface{ Pending() int }

// TouchTakeWait bounds how long POST /sim/touch waits for the firmware to
// take the touch from the controller's queue before replying.
const TouchTakeWait = 500 * time.Millisecond

// Inputs serves the simulator's input endpoints. A nil field leaves its
// endpoint answering 404 not_found with a message saying so.
type Inputs struct {
	// Boot presses the BOOT button.
	Boot func()
	// Touch is the panel's touch controller.
	Touch Toucher
	// Power cuts the power. It may not return.
	Power func()
	// AfterFunc runs f after d (time.AfterFunc when nil); tests pass a
	// fake clock's.
	AfterFunc func(d time.Duration, f func())
}

// TouchRequest is the body of POST /sim/touch.
type TouchRequest struct {
	Action string `json:"action" doc:"down or up"`
	X      *int   `json:"x" doc:"0-239"`
	Y      *int   `json:"y" doc:"0-239"`
}

// Check validates a touch request and reports whether it is a touch down.
func (t TouchRequest) Check() (down bool, err error) {
	switch t.Action {
	case "down":
		down = true
	case "up":
	default:
		return false, api.Errorf(api.ErrBadRequest, "action must be down or up, not %q", t.Action)
	}
	for _, c := range []struct {
		name string
		v    *int
	}{{"x", t.X}, {"y", t.Y}} {
		switch {
		case c.v == nil:
			return false, api.Errorf(api.ErrBadRequest, "%s is required", c.name)
		case *c.v < 0 || *c.v >= hal.ScreenWidth:
			return false, api.Errorf(api.ErrBadRequest, "%s must be 0-%d, not %d", c.name, hal.ScreenWidth-1, *c.v)
		}
	}
	return down, nil
}

// Routes returns the three POST endpoints (not over the link).
func (in *Inputs) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodPost, Path: "/sim/boot", Status: http.StatusNoContent,
			Summary: "Simulator extension: press the BOOT button (access point on for 5 minutes)",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if in.Boot == nil {
					api.WriteError(w, api.Errorf(api.ErrNotFound, "this simulator has no BOOT button"))
					return
				}
				in.Boot()
				w.WriteHeader(http.StatusNoContent)
			})},
		{Method: http.MethodPost, Path: "/sim/touch", Status: http.StatusNoContent, Request: TouchRequest{},
			Summary: "Simulator extension: touch the screen (down) or let go (up) at x, y",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req TouchRequest
				if err := api.Decode(r, &req, false); err != nil {
					api.WriteError(w, err)
					return
				}
				down, err := req.Check()
				if err != nil {
					api.WriteError(w, err)
					return
				}
				if in.Touch == nil {
					api.WriteError(w, api.Errorf(api.ErrNotFound, "this simulator has no touch panel"))
					return
				}
				in.Touch.Touch(down, *req.X, *req.Y)
				if q, ok := in.Touch.(queued); ok {
					// Reply once the firmware took the touch from the
					// controller (or TouchTakeWait passed): a script that
					// touches, then changes what touches do, gets the order
					// it wrote.
					for deadline := time.Now().Add(TouchTakeWait); q.Pending() > 0 && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
				}
				w.WriteHeader(http.StatusNoContent)
			})},
		{Method: http.MethodPost, Path: "/sim/power", Status: http.StatusAccepted,
			Summary: "Simulator extension: pull the power (a hard stop 100 ms after the reply)",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if in.Power == nil {
					api.WriteError(w, api.Errorf(api.ErrNotFound, "this simulator has no power switch"))
					return
				}
				w.WriteHeader(http.StatusAccepted)
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				after := in.AfterFunc
				if after == nil {
					after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
				}
				after(PowerCutDelay, in.Power)
			})},
	}
}
