package network

import (
	"net/http"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
)

// knownBody is the body of PUT /network/known.
type knownBody struct {
	// Passphrase is 8-63 characters; absent, null or "" saves an open
	// network.
	Passphrase *string `json:"passphrase,omitempty"`
}

// JoinBody is the body of POST /network/join.
type JoinBody struct {
	SSID string `json:"ssid"`
	// Passphrase, when absent, is the saved one (or none for an open
	// network).
	Passphrase *string `json:"passphrase,omitempty"`
}

// STAPatch is the body of PATCH /network.
type STAPatch struct {
	STAEnabled *bool `json:"sta_enabled,omitempty"`
}

// Routes returns the network endpoints (not served over the host link).
// Every changing endpoint replies 200 with the State it leads to; a
// cutting change happens CutoffDelay after the reply is written.
func (n *Network) Routes() []api.Route {
	ssidParam := []api.Param{{Name: "ssid", Type: "string", Required: true, Description: "the network's name (1-32 bytes)"}}
	return []api.Route{
		{Method: http.MethodGet, Path: "/network", Summary: "The joined network, known networks and the access point",
			Response: State{}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, n.State())
			})},
		{Method: http.MethodPatch, Path: "/network", Summary: "Let the station join networks or not (false drops the joined network after the reply)",
			Request: STAPatch{}, Response: State{},
			Handler: n.changing(func(r *http.Request) (action, error) {
				var p STAPatch
				if err := api.Decode(r, &p, false); err != nil {
					return nil, err
				}
				if p.STAEnabled == nil {
					return func(*model, Radio, time.Time) (bool, error) { return false, nil }, nil
				}
				return setSTA(*p.STAEnabled), nil
			})},
		{Method: http.MethodGet, Path: "/network/scan", Summary: "Networks in range, strongest first (a long operation)",
			Response: ScanResult{}, Errors: []*api.Error{api.ErrBusy},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				res, err := n.Scan(r.Context())
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, res)
			})},
		{Method: http.MethodPut, Path: "/network/known", Summary: "Save a network (16 kept; one more forgets the one saved longest ago)",
			Query: ssidParam, Request: knownBody{}, Response: State{},
			Handler: n.changing(func(r *http.Request) (action, error) {
				ssid, err := ssidOf(r)
				if err != nil {
					return nil, err
				}
				var b knownBody
				if err := api.Decode(r, &b, true); err != nil {
					return nil, err
				}
				pass := ""
				if b.Passphrase != nil {
					pass = *b.Passphrase
				}
				return saveKnown(ssid, pass), nil
			})},
		{Method: http.MethodDelete, Path: "/network/known", Summary: "Forget a known network (the joined one is left after the reply)",
			Query: ssidParam, Response: State{}, Errors: []*api.Error{api.ErrNotFound},
			Handler: n.changing(func(r *http.Request) (action, error) {
				ssid, err := ssidOf(r)
				if err != nil {
					return nil, err
				}
				return forget(ssid), nil
			})},
		{Method: http.MethodPost, Path: "/network/join", Summary: "Join a network in range (saved passphrase, or open); 404 when not in range, 400 for a wrong passphrase",
			Request: JoinBody{}, Response: State{}, Errors: []*api.Error{api.ErrNotFound},
			Handler: n.changing(func(r *http.Request) (action, error) {
				var b JoinBody
				if err := api.Decode(r, &b, false); err != nil {
					return nil, err
				}
				return join(b.SSID, b.Passphrase), nil
			})},
		{Method: http.MethodPatch, Path: "/network/ap", Summary: "Turn the access point on (stays; a timed one counts down again) or off, set its name and passphrase",
			Request: APPatch{}, Response: State{},
			Handler: n.changing(func(r *http.Request) (action, error) {
				var p APPatch
				if err := api.Decode(r, &p, false); err != nil {
					return nil, err
				}
				return patchAP(p, n.opts.DefaultAPName, n.opts.DefaultAPPassphrase), nil
			})},
	}
}

// changing serves a changing endpoint: parse, check, reply, and only then
// schedule a cutting change.
func (n *Network) changing(parse func(r *http.Request) (action, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := parse(r)
		if err != nil {
			api.WriteError(w, err)
			return
		}
		st, later, err := n.do(f)
		if err != nil {
			api.WriteError(w, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, st)
		if later != nil {
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			later()
		}
	})
}

func ssidOf(r *http.Request) (string, error) {
	q := r.URL.Query()
	if !q.Has("ssid") {
		return "", api.Errorf(api.ErrBadRequest, "the ssid query parameter is required")
	}
	ssid := q.Get("ssid")
	if err := validSSID(ssid); err != nil {
		return "", api.Errorf(api.ErrBadRequest, "ssid: %v", err)
	}
	return ssid, nil
}
