package scenes

import (
	"net/http"

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
			Request: Scene{}, Response: List{}, Query: nameParam,
			Errors: []*api.Error{api.ErrBadRequest, api.ErrBadPath, api.ErrFull, api.ErrSlotTaken},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var s Scene
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
			Request: ApplyRequest{}, Response: Applied{}, Errors: partErrors,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req ApplyRequest
				if err := api.Decode(r, &req, false); err != nil {
					api.WriteError(w, err)
					return
				}
				a, err := m.Apply(req)
				reply(w, a, err)
			})},
		{Method: http.MethodPost, Path: "/scenes/end", Link: true, Summary: "End the scene running to its end; its then is done",
			Response: Ended{}, Errors: []*api.Error{api.ErrNotRunning},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var none struct{}
				if err := api.Decode(r, &none, true); err != nil {
					api.WriteError(w, err)
					return
				}
				e, err := m.End()
				reply(w, e, err)
			})},
	}
}
