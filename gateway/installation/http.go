package installation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/rest"
)

// timeZero: content files carry no modification time worth sending.
var timeZero time.Time

// Limits of the REST surface.
const (
	// MaxContent is the largest content file taken by POST
	// /v1/installation/content and UploadInstallationContent (a board's
	// volume is smaller).
	MaxContent = 256 << 20
)

// Handler serves the installation under /v1/installation on the
// gateway's API listener. Every request is identified, authorised
// (viewers and operators read plans, status and history; operators pause
// and abort; admins add content, apply, resume and roll back) and, when
// it changes something, audited through guard:
//
//	GET  /v1/installation                     current revision and unfinished run
//	GET  /v1/installation/schema              the description's JSON Schema
//	POST /v1/installation/content[?sha256=]   add a content file (raw body) -> {sha256, size}
//	GET  /v1/installation/content/{sha}       a content file
//	POST /v1/installation/plan                a description (YAML or JSON) -> per-board diff
//	POST /v1/installation/apply[?message=]    a description -> new revision and its run
//	GET  /v1/installation/status              every assigned board's state
//	GET  /v1/installation/history             the revisions, newest first
//	GET  /v1/installation/revisions/{n}       one revision with its description
//	POST /v1/installation/rollback            {revision, message} -> new revision and its run
//	POST /v1/installation/export              read the live boards -> {description, warnings}
//	GET  /v1/installation/runs/{id}           a run and its boards
//	POST /v1/installation/runs/{id}/pause|resume|abort
//
// A description sent for plan or apply names its content by sha256 (and
// size); the content must have been added first (holoctl does both).
func (in *Installer) Handler(guard *auth.Guard) http.Handler {
	h := &handler{in: in, guard: guard}
	mux := http.NewServeMux()
	p := "/v1/installation"
	mux.HandleFunc("GET "+p, h.current)
	mux.HandleFunc("GET "+p+"/schema", h.schema)
	mux.HandleFunc("POST "+p+"/content", h.addContent)
	mux.HandleFunc("GET "+p+"/content/{sha}", h.getContent)
	mux.HandleFunc("POST "+p+"/plan", h.plan)
	mux.HandleFunc("POST "+p+"/apply", h.apply)
	mux.HandleFunc("GET "+p+"/status", h.status)
	mux.HandleFunc("GET "+p+"/history", h.history)
	mux.HandleFunc("GET "+p+"/revisions/{n}", h.revision)
	mux.HandleFunc("POST "+p+"/rollback", h.rollback)
	mux.HandleFunc("POST "+p+"/export", h.export)
	mux.HandleFunc("GET "+p+"/runs/{id}", h.run)
	mux.HandleFunc("POST "+p+"/runs/{id}/{verb}", h.control)
	return mux
}

type handler struct {
	in    *Installer
	guard *auth.Guard
}

// outcome maps an error to its status, REST code and audit code.
func outcome(err error) (int, string, string) {
	var pe *ParseError
	switch {
	case err == nil:
		return http.StatusOK, "", auth.CodeOK
	case errors.As(err, &pe), errors.Is(err, ErrInvalid), errors.Is(err, ErrContent):
		return http.StatusBadRequest, "invalid_argument", "InvalidArgument"
	case errors.Is(err, ErrSection):
		// A section this gateway cannot hold, or one it failed to set
		// (and put back): no revision was stored.
		return http.StatusConflict, "failed_precondition", "FailedPrecondition"
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "not_found", "NotFound"
	case errors.Is(err, ErrState):
		return http.StatusConflict, "failed_precondition", "FailedPrecondition"
	case errors.Is(err, ErrRevisionTaken):
		return http.StatusConflict, "aborted", "Aborted"
	}
	return http.StatusInternalServerError, "internal", "Internal"
}

// door identifies and authorises the request; false means it was
// answered. The request it returns carries the caller's identity and the
// request id in its context: what the request asks of the other gateways
// of a cluster goes as the caller's, and is decided and audited for the
// caller there (gateway/cluster's routed requests).
func (h *handler) door(w http.ResponseWriter, r *http.Request, verb auth.Verb, name string) (*http.Request, *auth.Pending, bool) {
	return h.guard.AdmitHTTP(w, r, auth.Attributes{Verb: verb, Resource: auth.ResInstallation, Name: name,
		Operation: r.Method + " " + r.URL.Path})
}

func (h *handler) fail(w http.ResponseWriter, p *auth.Pending, err error) {
	status, code, acode := outcome(err)
	if p != nil {
		p.Done(acode)
	}
	rest.Error(w, status, code, err.Error())
}

// read answers a viewer's request: the door for name, then get's value
// as JSON, or its error.
func (h *handler) read(w http.ResponseWriter, r *http.Request, name string, get func(r *http.Request) (any, error)) {
	r, _, ok := h.door(w, r, auth.VerbRead, name)
	if !ok {
		return
	}
	v, err := get(r)
	if err != nil {
		h.fail(w, nil, err)
		return
	}
	rest.JSON(w, http.StatusOK, v)
}

// change answers a request that changes something: the door for verb
// and name, then do, audited with its outcome, and do's value as JSON
// or its error.
func (h *handler) change(w http.ResponseWriter, r *http.Request, verb auth.Verb, name string, do func(r *http.Request) (any, error)) {
	r, p, ok := h.door(w, r, verb, name)
	if !ok {
		return
	}
	v, err := do(r)
	if err != nil {
		h.fail(w, p, err)
		return
	}
	p.Done(auth.CodeOK)
	rest.JSON(w, http.StatusOK, v)
}

// started is the answer of a request that started a run.
func started(rev Revision, st RunStatus, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	rev.Description = nil // GET /v1/installation/revisions/{n} has it
	return map[string]any{"revision": rev, "run": st}, nil
}

func who(r *http.Request, g *auth.Guard) string {
	id, err := g.Identify(auth.CallerOfHTTP(r))
	if err != nil {
		return ""
	}
	return id.Name
}

func (h *handler) current(w http.ResponseWriter, r *http.Request) {
	h.read(w, r, "", func(r *http.Request) (any, error) {
		rev, _, err := h.in.Current()
		if err != nil {
			return nil, err
		}
		rev.Description = nil // GET /v1/installation/revisions/{n} has it
		out := map[string]any{"revision": rev}
		if id := h.in.ActiveRun(); id != 0 {
			if st, err := h.in.RunStatus(id); err == nil {
				out["run"] = st
			}
		}
		return out, nil
	})
}

func (h *handler) schema(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := h.door(w, r, auth.VerbRead, "schema"); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/schema+json")
	w.Write(Schema)
}

func (h *handler) addContent(w http.ResponseWriter, r *http.Request) {
	want := r.URL.Query().Get("sha256")
	h.change(w, r, auth.VerbCreate, "content "+want, func(r *http.Request) (any, error) {
		// A large file may take longer than the server's read timeout.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		if r.ContentLength > MaxContent {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrContent, MaxContent)
		}
		sha, n, err := h.in.storeContent(r.Context(), http.MaxBytesReader(w, r.Body, MaxContent), want)
		if err != nil {
			return nil, err
		}
		return map[string]any{"sha256": sha, "size": n}, nil
	})
}

func (h *handler) getContent(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	if _, _, ok := h.door(w, r, auth.VerbRead, "content "+sha); !ok {
		return
	}
	f, _, err := h.in.o.Contents.Open(sha)
	if err != nil {
		h.fail(w, nil, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+sha+`"`)
	http.ServeContent(w, r, "", timeZero, f)
}

// readDescription parses the request's body as a description naming its
// content by sha256. For an apply (stored true) the content must be in
// the store; a plan needs only each content's sha256 and size, so a
// viewer may diff before an admin uploads anything.
func (h *handler) readDescription(r *http.Request, stored bool) (*Description, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxDescription+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrInvalid, err)
	}
	return h.in.readDescription(r.URL.Query().Get("file"), data, stored)
}

// readDescription parses a description sent over the API, naming its
// content by sha256. For an apply (stored true) the content must be in
// the store; a plan needs only each content's sha256 and size, so a
// viewer may diff before an admin uploads anything. A content file of
// this machine is refused: the gateway would read it into its store.
func (in *Installer) readDescription(name string, data []byte, stored bool) (*Description, error) {
	if name == "" {
		name = "installation"
	}
	d, err := Parse(name, data)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	if err := in.ensureContent(ctx, d); err != nil && stored {
		return nil, err
	}
	for cname, c := range d.Content {
		if c.File != "" {
			return nil, fmt.Errorf("%w: content %s: send content by sha256, not a file of this machine (add the file with POST /v1/installation/content)", ErrInvalid, cname)
		}
		if stored {
			continue
		}
		if c.Size == 0 {
			n, ok := in.o.Contents.Has(c.SHA256)
			if !ok {
				return nil, fmt.Errorf("%w: content %s: give its size, or add the file first", ErrInvalid, cname)
			}
			c.Size = n
		}
		d.Content[cname] = c
	}
	if stored {
		if err := in.o.Contents.Load(d, ""); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (h *handler) plan(w http.ResponseWriter, r *http.Request) {
	h.read(w, r, "plan", func(r *http.Request) (any, error) {
		d, err := h.readDescription(r, false)
		if err != nil {
			return nil, err
		}
		sections := h.in.PlanSections(d)
		if sections == nil {
			sections = []SectionPlan{}
		}
		boards, err := h.in.PlanInstallation(r.Context(), d)
		if err != nil {
			return nil, err
		}
		return map[string]any{"boards": boards, "sections": sections}, nil
	})
}

func (h *handler) apply(w http.ResponseWriter, r *http.Request) {
	h.change(w, r, auth.VerbCreate, "apply", func(r *http.Request) (any, error) {
		d, err := h.readDescription(r, true)
		if err != nil {
			return nil, err
		}
		return started(h.in.Apply(r.Context(), d, who(r, h.guard), r.URL.Query().Get("message")))
	})
}

func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	h.read(w, r, "status", func(r *http.Request) (any, error) { return h.in.Status(r.Context()) })
}

func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	h.read(w, r, "history", func(r *http.Request) (any, error) {
		hs, err := h.in.History()
		if hs == nil {
			hs = []Revision{}
		}
		return map[string]any{"revisions": hs}, err
	})
}

func pathInt(r *http.Request, name string) (int, error) {
	n, err := strconv.Atoi(r.PathValue(name))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s %q", ErrNotFound, name, r.PathValue(name))
	}
	return n, nil
}

func (h *handler) revision(w http.ResponseWriter, r *http.Request) {
	h.read(w, r, "revision "+r.PathValue("n"), func(r *http.Request) (any, error) {
		n, err := pathInt(r, "n")
		if err != nil {
			return nil, err
		}
		return h.in.Revision(n)
	})
}

func (h *handler) rollback(w http.ResponseWriter, r *http.Request) {
	h.change(w, r, auth.VerbUpdate, "rollback", func(r *http.Request) (any, error) {
		var req struct {
			Revision int    `json:"revision"`
			Message  string `json:"message"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Revision < 1 {
			return nil, fmt.Errorf("%w: want {\"revision\": N, \"message\": \"...\"}", ErrInvalid)
		}
		return started(h.in.Rollback(r.Context(), req.Revision, who(r, h.guard), req.Message))
	})
}

func (h *handler) run(w http.ResponseWriter, r *http.Request) {
	h.read(w, r, "run "+r.PathValue("id"), func(r *http.Request) (any, error) {
		id, err := pathInt(r, "id")
		if err != nil {
			return nil, err
		}
		st, err := h.in.RunStatus(id)
		if err != nil {
			return nil, err
		}
		bs, err := h.in.RunBoards(id)
		if err != nil {
			return nil, err
		}
		return map[string]any{"run": st, "boards": bs}, nil
	})
}

func (h *handler) control(w http.ResponseWriter, r *http.Request) {
	verb := r.PathValue("verb")
	need := auth.VerbHalt
	switch verb {
	case "pause", "abort":
	case "resume":
		need = auth.VerbUpdate
	default:
		rest.Error(w, http.StatusNotFound, "not_found", "no such action "+strings.TrimSpace(verb))
		return
	}
	h.change(w, r, need, verb+" run "+r.PathValue("id"), func(r *http.Request) (any, error) {
		id, err := pathInt(r, "id")
		if err != nil {
			return nil, err
		}
		var req struct {
			Reason string `json:"reason"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req)
		switch verb {
		case "pause":
			return h.in.Pause(id, req.Reason)
		case "abort":
			return h.in.Abort(id, req.Reason)
		}
		return h.in.Resume(id)
	})
}

func (h *handler) export(w http.ResponseWriter, r *http.Request) {
	// Reading every board's files into the content store is an admin's.
	h.change(w, r, auth.VerbCreate, "export", func(r *http.Request) (any, error) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		d, warnings, err := h.in.Export(r.Context())
		if err != nil {
			return nil, err
		}
		if warnings == nil {
			warnings = []string{}
		}
		return map[string]any{"description": json.RawMessage(d.JSON()), "warnings": warnings}, nil
	})
}
