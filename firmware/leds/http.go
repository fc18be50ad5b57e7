package leds

import (
	"net/http"

	"github.com/holofleet/holofleet/bus/boardapi"
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
			Prepare: c.preparePatch, Handler: api.Prepared(c.preparePatch)},
	}
}

// preparePatch reads and checks a PATCH /leds body; the change is boardapi.LEDPatch.
func (c *Controller) preparePatch(r *http.Request) (api.Change, error) {
	var p boardapi.LEDPatch
	if err := api.Decode(r, &p, false); err != nil {
		return api.Change{}, err
	}
	if err := p.Check(); err != nil {
		return api.Change{}, err
	}
	return api.Change{Apply: func() (int, any, error) {
		st, err := c.Patch(p)
		return http.StatusOK, st, err
	}}, nil
}
