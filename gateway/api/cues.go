package api

// The cue lists' REST routes (gateway/cue), served beside grpc-gateway
// through Config.Extra by CueHandler:
//
//	GET    /v1/cuelists                          the lists (viewer)
//	GET    /v1/cuelists/events                   their events, Server-Sent Events (viewer)
//	GET    /v1/cuelists/{name}                   a list and its state (viewer)
//	PUT    /v1/cuelists/{name}                   save a list (admin; audited)
//	DELETE /v1/cuelists/{name}                   delete it (admin; audited)
//	GET    /v1/cuelists/{name}/state             its live state (viewer)
//	POST   /v1/cuelists/{name}/go[?asap=true]    GO the standby cue (operator; audited)
//	POST   /v1/cuelists/{name}/stop              STOP its waits and follows (operator)
//	POST   /v1/cuelists/{name}/back              standby one cue back (operator)
//	POST   /v1/cuelists/{name}/standby           {"cue": "2"}: set the standby (operator)
//	POST   /v1/cuelists/{name}/cues/{n}/start    jump: fire cue n (operator)
//
// The name "-" is the current list (the one last run). Every request
// meets the server's front first (credentials, cross-site checks, body
// limits), then the Guard: identity, auth.Authorize with resource
// auth.ResCues, a rate limit of changing requests per caller (the API's
// defaults, counted apart), and an audit record of every change and
// refusal. They are not gRPC methods yet (docs/show.md, "Left to do").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fault"
)

// Cues is what the cue routes need of the engine (*cue.Engine).
type Cues interface {
	Lists() []cue.List
	Get(name string) (cue.List, error)
	Put(l cue.List) (cue.List, error)
	Delete(name string) error
	State(name string) (cue.State, error)
	Go(name string, asap bool) (cue.State, error)
	Start(name string, n cue.Number, asap bool) (cue.State, error)
	Stop(name string) (cue.State, error)
	Back(name string) (cue.State, error)
	SetStandby(name string, n cue.Number) (cue.State, error)
	Watch(ctx context.Context) <-chan cue.Event
}

// CueRoutes are the Config.Extra patterns CueHandler serves.
var CueRoutes = []string{"/v1/cuelists", "/v1/cuelists/"}

// CueHandler serves the cue lists' routes with guard's decisions; each
// caller may make DefaultRate changing requests a second (DefaultBurst at
// once), as on the rest of the API.
func CueHandler(cues Cues, guard *auth.Guard) http.Handler {
	return CueHandlerLimited(cues, guard, auth.NewRateLimiter(DefaultRate, DefaultBurst, nil))
}

// CueHandlerLimited is CueHandler with its own rate limiter of changing
// requests (by identity and source; nil: none). A request beyond is 429
// resource_exhausted and recorded.
func CueHandlerLimited(cues Cues, guard *auth.Guard, rate *auth.RateLimiter) http.Handler {
	h := &cueHandler{cues: cues, guard: guard, rate: rate}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cuelists", h.serve(auth.VerbRead, h.list))
	mux.HandleFunc("GET /v1/cuelists/events", h.serveEvents)
	mux.HandleFunc("GET /v1/cuelists/{name}", h.serve(auth.VerbRead, h.get))
	mux.HandleFunc("PUT /v1/cuelists/{name}", h.serve(auth.VerbUpdate, h.put))
	mux.HandleFunc("DELETE /v1/cuelists/{name}", h.serve(auth.VerbDelete, h.del))
	mux.HandleFunc("GET /v1/cuelists/{name}/state", h.serve(auth.VerbRead, h.state))
	mux.HandleFunc("POST /v1/cuelists/{name}/go", h.serve(auth.VerbAct, h.goCue))
	mux.HandleFunc("POST /v1/cuelists/{name}/stop", h.serve(auth.VerbAct, h.stop))
	mux.HandleFunc("POST /v1/cuelists/{name}/back", h.serve(auth.VerbAct, h.back))
	mux.HandleFunc("POST /v1/cuelists/{name}/standby", h.serve(auth.VerbAct, h.standby))
	mux.HandleFunc("POST /v1/cuelists/{name}/cues/{number}/start", h.serve(auth.VerbAct, h.start))
	return mux
}

type cueHandler struct {
	cues  Cues
	guard *auth.Guard
	rate  *auth.RateLimiter
}

// listName is the path's list name; "-" is the current list ("").
func listName(r *http.Request) string {
	if n := r.PathValue("name"); n != "-" {
		return n
	}
	return ""
}

// attrs describes r for the Guard.
func (h *cueHandler) attrs(r *http.Request, verb auth.Verb) auth.Attributes {
	c := auth.CallerOfHTTP(r)
	return auth.Attributes{Surface: auth.SurfaceREST, Verb: verb, Resource: auth.ResCues, Name: r.PathValue("name"),
		Operation: r.Method + " " + r.URL.Path, Client: c.Addr, Agent: c.Agent, RequestID: r.Header.Get(RequestIDHeader)}
}

// admit identifies and authorises r; false means it answered.
func (h *cueHandler) admit(w http.ResponseWriter, r *http.Request, a *auth.Attributes) (*auth.Pending, bool) {
	who, err := h.guard.Identify(auth.CallerOfHTTP(r))
	if err != nil {
		h.guard.Refuse(*a, err)
		writeFault(w, err)
		return nil, false
	}
	a.Who = who
	p, err := h.guard.Check(*a)
	if err != nil {
		writeFault(w, err)
		return nil, false
	}
	if a.Changing() {
		if err := h.rate.Allow(auth.Key(who, auth.CallerOfHTTP(r))); err != nil {
			h.guard.Refuse(*a, err)
			writeFault(w, err)
			return nil, false
		}
	}
	return p, true
}

// serve wraps an operation: the Guard's decision, the answer, the audit
// record of a change.
func (h *cueHandler) serve(verb auth.Verb, op func(r *http.Request, a *auth.Attributes) (int, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := h.attrs(r, verb)
		if verb == auth.VerbUpdate {
			if _, err := h.cues.Get(r.PathValue("name")); errors.Is(err, cue.ErrNoList) {
				a.Verb = auth.VerbCreate
			}
		}
		p, ok := h.admit(w, r, &a)
		if !ok {
			return
		}
		code, v, err := op(r, &a)
		p.Done(auth.CodeOf(err))
		if err != nil {
			writeFault(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		b, _ := json.Marshal(v)
		_, _ = w.Write(append(b, '\n'))
	}
}

// writeFault answers err by its class (package fault's table).
func writeFault(w http.ResponseWriter, err error) {
	c := fault.Of(err)
	writeErrorBody(w, c.HTTP(), ErrorBody{Error: codeName(c.GRPC()), Message: err.Error()})
}

// ListWithState is GET /v1/cuelists/{name}'s answer.
type ListWithState struct {
	cue.List
	State cue.State `json:"state"`
}

func (h *cueHandler) list(*http.Request, *auth.Attributes) (int, any, error) {
	return http.StatusOK, map[string]any{"lists": h.cues.Lists()}, nil
}

func (h *cueHandler) get(r *http.Request, _ *auth.Attributes) (int, any, error) {
	l, err := h.cues.Get(listName(r))
	if err != nil {
		return 0, nil, err
	}
	st, err := h.cues.State(l.Name)
	return http.StatusOK, ListWithState{List: l, State: st}, err
}

// maxListBody bounds a saved list (1000 cues of a few actions).
const maxListBody = 4 << 20

func (h *cueHandler) put(r *http.Request, _ *auth.Attributes) (int, any, error) {
	var l cue.List
	dec := json.NewDecoder(io.LimitReader(r.Body, maxListBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return 0, nil, fmt.Errorf("%w: the body is not a cue list: %v", cue.ErrBadList, err)
	}
	name := r.PathValue("name")
	if l.Name == "" {
		l.Name = name
	}
	if l.Name != name {
		return 0, nil, fmt.Errorf("%w: the body names %q, the path %q", cue.ErrBadList, l.Name, name)
	}
	saved, err := h.cues.Put(l)
	return http.StatusOK, saved, err
}

func (h *cueHandler) del(r *http.Request, _ *auth.Attributes) (int, any, error) {
	return http.StatusOK, map[string]string{"deleted": r.PathValue("name")}, h.cues.Delete(r.PathValue("name"))
}

func (h *cueHandler) state(r *http.Request, _ *auth.Attributes) (int, any, error) {
	st, err := h.cues.State(listName(r))
	return http.StatusOK, st, err
}

func (h *cueHandler) goCue(r *http.Request, _ *auth.Attributes) (int, any, error) {
	asap, err := asapParam(r)
	if err != nil {
		return 0, nil, err
	}
	st, err := h.cues.Go(listName(r), asap)
	return http.StatusOK, st, err
}

func asapParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("asap")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: asap=%q (true or false)", cue.ErrBadRequest, v)
	}
	return b, nil
}

func (h *cueHandler) stop(r *http.Request, _ *auth.Attributes) (int, any, error) {
	st, err := h.cues.Stop(listName(r))
	return http.StatusOK, st, err
}

func (h *cueHandler) back(r *http.Request, _ *auth.Attributes) (int, any, error) {
	st, err := h.cues.Back(listName(r))
	return http.StatusOK, st, err
}

func (h *cueHandler) standby(r *http.Request, _ *auth.Attributes) (int, any, error) {
	var req struct {
		Cue cue.Number `json:"cue"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return 0, nil, fmt.Errorf("%w: want {\"cue\": \"<number>\"}: %v", cue.ErrBadRequest, err)
	}
	st, err := h.cues.SetStandby(listName(r), req.Cue)
	return http.StatusOK, st, err
}

func (h *cueHandler) start(r *http.Request, _ *auth.Attributes) (int, any, error) {
	asap, err := asapParam(r)
	if err != nil {
		return 0, nil, err
	}
	st, err := h.cues.Start(listName(r), cue.Number(r.PathValue("number")), asap)
	return http.StatusOK, st, err
}

// serveEvents streams every list's events as Server-Sent Events (event:
// the type, data: the event's JSON) until the client leaves.
func (h *cueHandler) serveEvents(w http.ResponseWriter, r *http.Request) {
	a := h.attrs(r, auth.VerbWatch)
	if _, ok := h.admit(w, r, &a); !ok {
		return
	}
	liftDeadlines(w, false)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch := h.cues.Watch(ctx)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	keep := time.NewTicker(SSEKeepAlive)
	defer keep.Stop()
	for {
		var err error
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			b, merr := json.Marshal(ev)
			if merr != nil {
				return
			}
			_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.N, ev.Type, b)
		case <-keep.C:
			// A show may be quiet for long: a comment tells the page
			// (and any proxy) the stream is alive.
			_, err = io.WriteString(w, ": keep-alive\n\n")
		}
		if err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// SSEKeepAlive is how often a quiet cue event stream sends a comment, well
// inside the console's 60 s silence limit.
const SSEKeepAlive = 15 * time.Second
