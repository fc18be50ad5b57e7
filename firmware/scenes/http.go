package scenes

import (
	"net/http"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

// Routes returns the scene endpoints, all served over the host link too.
func (m *Manager) Routes() []api.Route {
	reply := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			api.WriteError(w, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, v)
	}
	nameParam := []api.Param{{Name: "name", Type: "string", Required: true, Description: "the scene's name, 1-32 bytes"}}
	partErrors := []*api.Error{api.ErrBadRequest, api.ErrBadPath, api.ErrIsADirectory, api.ErrNotADirectory,
		api.ErrNotFound, api.ErrNotPlayable, api.ErrNotReady, api.ErrUnknownScene}
	return []api.Route{
		{Method: http.MethodGet, Path: "/scenes", Link: true, Summary: "Saved scenes, by name, and the scene running to its end",
			Response: List{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, m.List())
			})},
		{Method: http.MethodPut, Path: "/scenes/scene", Link: true, Summary: "Save a scene under name (files are checked when it is applied)",
			Request: boardapi.Scene{}, Response: List{}, Query: nameParam,
			Errors: []*api.Error{api.ErrBadRequest, api.ErrBadPath, api.ErrFull, api.ErrSlotTaken},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var s boardapi.Scene
				if err := api.Decode(r, &s, false); err != nil {
					api.WriteError(w, err)
					return
				}
				l, err := m.Save(r.URL.Query().Get("name"), s)
				reply(w, l, err)
			})},
		{Method: http.MethodDelete, Path: "/scenes/scene", Link: true, Summary: "Forget a saved scene (and boot_scene, when it named it)",
			Response: List{}, Query: nameParam, Errors: []*api.Error{api.ErrUnknownScene},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				l, err := m.Delete(r.URL.Query().Get("name"))
				reply(w, l, err)
			})},
		{Method: http.MethodPost, Path: "/scenes/apply", Link: true,
			Summary: "Apply a saved scene ({name} or {slot}) or a given one ({scene}); screen, then LEDs, then holo",
			Request: boardapi.SceneApply{}, Response: Applied{}, Errors: partErrors,
			Query: []api.Param{{Name: boardapi.QueryClipStart, Type: "integer",
				Description: "extension clip-sync: the start of the scene's clip on the board's aligned clock (the gateway's time, Unix µs), at most 60 s ahead and 10 s behind it; ignored while the board is not aligned"}},
			Prepare: m.prepareApply, Handler: api.Prepared(m.prepareApply)},
		{Method: http.MethodPost, Path: "/scenes/end", Link: true, Summary: "End the scene running to its end; its then is done",
			Response: Ended{}, Errors: []*api.Error{api.ErrNotRunning},
			Prepare: m.prepareEnd, Handler: api.Prepared(m.prepareEnd)},
	}
}

// prepareApply reads a POST /scenes/apply body and checks it (Check); the
// change is Apply, which checks the screen's file when it runs.
//
// The scene's clip starts its timeline as a shown clip does: at the
// moment the request names (clip_start, fire_at, at_ms: Options.Start)
// or, without one, when the board took the request, not when the change
// opened the file, so that boards taking one group frame start together.
func (m *Manager) prepareApply(r *http.Request) (api.Change, error) {
	taken := m.clk.Now()
	var req boardapi.SceneApply
	if err := api.Decode(r, &req, false); err != nil {
		return api.Change{}, err
	}
	if err := m.Check(req); err != nil {
		return api.Change{}, err
	}
	if m.start != nil {
		at, ok, err := m.start(r)
		if err != nil {
			return api.Change{}, err
		}
		if ok {
			taken = at
		}
	}
	return api.Change{Apply: func() (int, any, error) {
		a, err := m.applyAt(req, taken)
		return http.StatusOK, a, err
	}}, nil
}

// prepareEnd reads POST /scenes/end's empty body. Whether a scene runs is
// the change's to find: one scheduled to start before it may not run yet.
func (m *Manager) prepareEnd(r *http.Request) (api.Change, error) {
	var none struct{}
	if err := api.Decode(r, &none, true); err != nil {
		return api.Change{}, err
	}
	return api.Change{Apply: func() (int, any, error) {
		e, err := m.End()
		return http.StatusOK, e, err
	}}, nil
}
