package dmx

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/rest"
)

// PatchPath is where the patch is served on the API's listener.
const PatchPath = "/v1/dmx/patch"

// PatchView is the body of GET /v1/dmx/patch.
type PatchView struct {
	Patch    *Patch             `json:"patch"`
	Profiles map[string]Profile `json:"profiles"`
	Sources  []SourceView       `json:"sources"`
	// Inputs are the listeners ("sacn udp 127.0.0.1:5568").
	Inputs []string `json:"inputs,omitempty"`
}

// Handler serves the patch on PatchPath: GET shows it with the profiles
// and the sources heard now (viewer), PUT replaces it (admin; checked
// first, refused whole with the reasons, recorded in the audit log).
// save, when set, keeps an accepted patch (the patch file) before it is
// used; inputs lists the listeners for the view.
type Handler struct {
	Engine *Engine
	Guard  *auth.Guard
	Save   func(*Patch) error
	Inputs func() []string
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != PatchPath {
		rest.Error(w, http.StatusNotFound, "not_found", "no such path")
		return
	}
	verb := auth.VerbRead
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPut:
		verb = auth.VerbUpdate
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		rest.Error(w, http.StatusMethodNotAllowed, "method_not_allowed", "GET or PUT")
		return
	}
	_, p, ok := h.Guard.AdmitHTTP(w, r, auth.Attributes{Verb: verb, Resource: auth.ResDMX, Operation: r.Method + " " + PatchPath})
	if !ok {
		return
	}
	if verb == auth.VerbRead {
		v := PatchView{Patch: h.Engine.Patch(), Profiles: Profiles, Sources: h.Engine.Sources()}
		if h.Inputs != nil {
			v.Inputs = h.Inputs()
		}
		if v.Sources == nil {
			v.Sources = []SourceView{}
		}
		rest.JSON(w, http.StatusOK, v)
		return
	}
	np, err := ParsePatch(io.LimitReader(r.Body, 1<<20))
	if err == nil && h.Save != nil {
		err = h.Save(np)
	}
	if err == nil {
		err = h.Engine.SetPatch(np)
	}
	if err != nil {
		c := fault.Of(err)
		p.Done(c.GRPC().String())
		code := "invalid"
		if !errors.Is(err, ErrBadPatch) {
			code = strings.ToLower(c.String())
		}
		rest.Error(w, c.HTTP(), code, err.Error())
		return
	}
	p.Done(auth.CodeOK)
	rest.JSON(w, http.StatusOK, PatchView{Patch: np, Profiles: Profiles, Sources: []SourceView{}})
}
