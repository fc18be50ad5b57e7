package leds

import (
	"net/http"

	"github.com/holofleet/holofleet/firmware/api"
)

// Routes returns GET and PATCH /leds; both are served over the host link.
func (c *Controller) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/leds", Link: true, Summary: "LED strip state",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, c.State())
			})},
		{Method: http.MethodPatch, Path: "/leds", Link: true, Summary: "Change the LED strip's mode, colour, loop or brightness",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var p Patch
				if err := api.Decode(r, &p, false); err != nil {
					api.WriteError(w, err)
					return
				}
				st, err := c.Patch(p)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, st)
			})},
	}
}
