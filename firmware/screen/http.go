package screen

import (
	"net/http"

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
			Response: State{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reply(w, c.Off(), nil)
			})},
		{Method: http.MethodPost, Path: "/screen/show", Link: true,
			Summary: "Show a clip or image (path, with loop or loops), a colour, or the calibration crosshair: exactly one",
			Request: ShowRequest{}, Response: State{},
			Errors: []*api.Error{api.ErrBadRequest, api.ErrBadPath, api.ErrIsADirectory, api.ErrNotADirectory, api.ErrNotFound, api.ErrNotPlayable},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req ShowRequest
				if err := api.Decode(r, &req, false); err != nil {
					api.WriteError(w, err)
					return
				}
				st, err := c.Show(req)
				reply(w, st, err)
			})},
	}
}
