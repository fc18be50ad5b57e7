package screen

import (
	"net/http"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

// Patch is the body of PATCH /screen.
type Patch struct {
	Backlight *int `json:"backlight,omitempty" doc:"percent, 0-100, until the next start"`
}

// Routes returns GET, PATCH and DELETE /screen and POST /screen/show, all
// served over the host link too.
func (c *Controller) Routes() []api.Route {
	reply := func(w http.ResponseWriter, st State, err error) {
		if err != nil {
			api.WriteError(w, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, st)
	}
	return []api.Route{
		{Method: http.MethodGet, Path: "/screen", Link: true, Summary: "What the screen shows, its power and backlight, and the clip's counters",
			Response: State{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, c.State())
			})},
		{Method: http.MethodPatch, Path: "/screen", Link: true, Summary: "Change the backlight until the next start",
			Request: Patch{}, Response: State{}, Errors: []*api.Error{api.ErrBadRequest},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var p Patch
				if err := api.Decode(r, &p, false); err != nil {
					api.WriteError(w, err)
					return
				}
				if p.Backlight == nil {
					reply(w, c.State(), nil)
					return
				}
				st, err := c.SetBacklight(*p.Backlight)
				reply(w, st, err)
			})},
		{Method: http.MethodDelete, Path: "/screen", Link: true, Summary: "Stop what is shown, sleep the panel, backlight off",
			Response: State{}, Prepare: c.prepareOff, Handler: api.Prepared(c.prepareOff)},
		{Method: http.MethodPost, Path: "/screen/show", Link: true,
			Summary: "Show a clip or image (path, with loop or loops), a colour, or the calibration crosshair: exactly one",
			Request: boardapi.ShowRequest{}, Response: State{},
			Errors: []*api.Error{api.ErrBadRequest, api.ErrBadPath, api.ErrIsADirectory, api.ErrNotADirectory, api.ErrNotFound, api.ErrNotPlayable},
			Query: []api.Param{{Name: boardapi.QueryClipStart, Type: "integer",
				Description: "extension clip-sync: the clip's start on the board's aligned clock (the gateway's time, Unix µs), at most 60 s ahead and 10 s behind it; ignored while the board is not aligned"}},
			Prepare: c.prepareShow, Handler: api.Prepared(c.prepareShow)},
	}
}

// prepareOff is DELETE /screen, which has nothing to check.
func (c *Controller) prepareOff(*http.Request) (api.Change, error) {
	return api.Change{Apply: func() (int, any, error) { return http.StatusOK, c.Off(), nil }}, nil
}

// prepareShow reads a POST /screen/show body and prepares it (its file
// opened and checked); the change presents it.
//
// A clip's timeline starts at the moment the request names (fire_at,
// at_ms) or, without one, when the board took the request: opening and
// checking the file takes its time, which must not set boards that took
// one group frame together apart.
func (c *Controller) prepareShow(r *http.Request) (api.Change, error) {
	taken := c.clk.Now()
	var req boardapi.ShowRequest
	if err := api.Decode(r, &req, false); err != nil {
		return api.Change{}, err
	}
	p, err := c.Prepare(req, false)
	if err != nil {
		return api.Change{}, err
	}
	p.StartAt(taken)
	if c.start != nil {
		at, ok, err := c.start(r)
		if err != nil {
			p.Discard()
			return api.Change{}, err
		}
		if ok {
			p.StartAt(at)
		}
	}
	return api.Change{
		Apply: func() (int, any, error) {
			st, _, err := c.Present(p)
			return http.StatusOK, st, err
		},
		Discard: p.Discard,
	}, nil
}
