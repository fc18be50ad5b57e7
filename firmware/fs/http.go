package fs

import (
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/longop"
	"github.com/holofleet/holofleet/firmware/media"
	"github.com/holofleet/holofleet/firmware/openapi"
)

// Options configure the files feature.
type Options struct {
	// Capacity of the volume in bytes (DefaultCapacity when 0).
	Capacity int64
	// Screen, when set, is told before a file it may show changes.
	Screen ScreenGuard
}

// Feature installs the storage volume (<data>/storage) with its /fs
// endpoints, and the /media endpoints that read playable files on it.
func Feature(opts Options) board.Feature {
	return func(b *board.Boot) error {
		v, err := OpenVolume(filepath.Join(b.Board.DataDir(), "storage"), opts.Capacity, opts.Screen)
		if err != nil {
			return err
		}
		b.OnClose(func() { _ = v.Close() })
		b.Set(volumeKey{}, v)
		b.AddFeature("files", Routes(v, b.Long)...)
		b.AddFeature("", media.Routes(v)...)
		return nil
	}
}

type volumeKey struct{}

// VolumeOf returns the boot's volume (nil before the feature is
// installed), for features that read files or guard the screen
// (VolumeOf(b).SetGuard(player)).
func VolumeOf(b *board.Boot) *Volume {
	v, _ := b.Value(volumeKey{}).(*Volume)
	return v
}

// MoveRequest is the body of POST /fs/move and POST /fs/copy.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty" doc:"replace a file at to (never a directory)"`
}

// MkdirRequest is the body of POST /fs/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty" doc:"create missing directories on the way"`
}

// Bool parses a boolean query value: true, false, 1 or 0 (absent: false).
func Bool(r *http.Request, name string) (bool, error) {
	switch s := r.URL.Query().Get(name); s {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, api.Errorf(api.ErrBadRequest, "%s must be true, false, 1 or 0, not %q", name, s)
	}
}

func bools(r *http.Request, names ...string) ([]bool, error) {
	out := make([]bool, len(names))
	for i, n := range names {
		b, err := Bool(r, n)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func pathParam(r *http.Request) (string, error) {
	q := r.URL.Query()
	if !q.Has("path") {
		return "", api.Errorf(api.ErrBadPath, "path is required")
	}
	return q.Get("path"), nil
}

var (
	qPath      = api.Param{Name: "path", Type: "string", Required: true, Description: "volume path, such as /clips/intro.mov"}
	qOverwrite = api.Param{Name: "overwrite", Type: "boolean", Description: "true/false/1/0: replace an existing file"}
	qParents   = api.Param{Name: "parents", Type: "boolean", Description: "true/false/1/0: create missing directories"}
)

// contentTypes maps file extensions to download types. A fixed table, so
// the reply does not depend on the host's MIME database.
var contentTypes = map[string]string{
	".mov": "video/quicktime", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".json": "application/json", ".txt": "text/plain; charset=utf-8",
	".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
	".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml",
}

// ContentType is the download type of a file name.
func ContentType(name string) string {
	if t, ok := contentTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

// Routes returns the /fs endpoints over v; long takes the long-operation
// lock for hashing, uploads, downloads and copies.
func Routes(v *Volume, long *longop.Lock) []api.Route {
	h := &handlers{v: v, long: long}
	return []api.Route{
		{Method: http.MethodGet, Path: "/fs", Summary: "The storage volume's size and use", Response: Usage{},
			Handler: http.HandlerFunc(h.usage)},
		{Method: http.MethodGet, Path: "/fs/list", Summary: "A directory's entries (path defaults to /)", Response: Listing{},
			Query:   []api.Param{{Name: "path", Type: "string", Description: "a directory; / when omitted"}},
			Errors:  []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrNotFound},
			Handler: http.HandlerFunc(h.list)},
		{Method: http.MethodGet, Path: "/fs/entry", Summary: "One file or directory; sha256=true hashes a file (a long operation)",
			Response: Entry{}, Query: []api.Param{qPath, {Name: "sha256", Type: "boolean", Description: "true/false/1/0"}},
			Errors:  []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrNotFound, api.ErrBusy, api.ErrBadRequest},
			Handler: http.HandlerFunc(h.entry)},
		{Method: http.MethodDelete, Path: "/fs/entry", Summary: "Delete a file, or a directory (recursive=true when not empty)",
			Status: http.StatusNoContent, Query: []api.Param{qPath, {Name: "recursive", Type: "boolean", Description: "true/false/1/0"}},
			Errors:  []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrNotFound, api.ErrNotEmpty, api.ErrBadRequest},
			Handler: http.HandlerFunc(h.remove)},
		{Method: http.MethodGet, Path: "/fs/file", Private: true, Summary: "Download a file (a long operation)",
			Response: openapi.RawContent("*/*"), Query: []api.Param{qPath},
			Errors:  []*api.Error{api.ErrBadPath, api.ErrIsADirectory, api.ErrNotADirectory, api.ErrNotFound, api.ErrBusy},
			Handler: http.HandlerFunc(h.download)},
		{Method: http.MethodPut, Path: "/fs/file", Raw: true,
			Summary:  "Upload a file: 201 when created, 200 when it replaced one (a long operation)",
			Response: Entry{}, Status: http.StatusCreated, AlsoStatus: []int{http.StatusOK},
			Query: []api.Param{qPath, qOverwrite, qParents, {Name: "sha256", Type: "string", Description: "hex SHA-256 the bytes must match"}},
			Errors: []*api.Error{api.ErrBadPath, api.ErrIsADirectory, api.ErrNotADirectory, api.ErrNotFound, api.ErrExists,
				api.ErrBusy, api.ErrLengthRequired, api.ErrSHA256Mismatch, api.ErrBadSHA256, api.ErrNoSpace, api.ErrBadRequest},
			Handler: http.HandlerFunc(h.upload)},
		{Method: http.MethodPost, Path: "/fs/mkdir", Summary: "Create a directory", Request: MkdirRequest{},
			Response: Entry{}, Status: http.StatusCreated,
			Errors:  []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrNotFound, api.ErrExists, api.ErrNoSpace},
			Handler: http.HandlerFunc(h.mkdir)},
		{Method: http.MethodPost, Path: "/fs/move", Summary: "Move or rename a file or directory", Request: MoveRequest{},
			Response: Entry{},
			Errors:   []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrNotFound, api.ErrExists},
			Handler:  http.HandlerFunc(h.move)},
		{Method: http.MethodPost, Path: "/fs/copy", Summary: "Copy a file (a long operation)", Request: MoveRequest{},
			Response: Entry{}, Status: http.StatusCreated,
			Errors: []*api.Error{api.ErrBadPath, api.ErrIsADirectory, api.ErrNotADirectory, api.ErrNotFound, api.ErrExists,
				api.ErrBusy, api.ErrNoSpace},
			Handler: http.HandlerFunc(h.copy)},
	}
}

type handlers struct {
	v    *Volume
	long *longop.Lock
}

func (h *handlers) acquire(what string) (func(), error) {
	if h.long == nil {
		return func() {}, nil
	}
	return h.long.TryAcquire(what)
}

func (h *handlers) usage(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, h.v.Usage())
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) {
	p := "/"
	if r.URL.Query().Has("path") {
		p = r.URL.Query().Get("path")
	}
	l, err := h.v.List(p)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, l)
}

func (h *handlers) entry(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	hash, err := Bool(r, "sha256")
	if err != nil {
		api.WriteError(w, err)
		return
	}
	if hash {
		e, err := h.v.Stat(r.Context(), p, false)
		if err != nil {
			api.WriteError(w, err)
			return
		}
		if e.Type == TypeFile {
			release, err := h.acquire("hashing " + p)
			if err != nil {
				api.WriteError(w, err)
				return
			}
			defer release()
		}
	}
	e, err := h.v.Stat(r.Context(), p, hash)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, e)
}

func (h *handlers) remove(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	recursive, err := Bool(r, "recursive")
	if err != nil {
		api.WriteError(w, err)
		return
	}
	if err := h.v.Remove(p, recursive); err != nil {
		api.WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) download(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	if _, err := h.v.Stat(r.Context(), p, false); err != nil {
		api.WriteError(w, err)
		return
	}
	what := "downloading " + p
	release, err := h.acquire(what)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	defer release()
	file, e, err := h.v.Open(p)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	defer file.Close()
	w.Header().Set("Content-Type", ContentType(e.Name))
	w.Header().Set("Content-Length", strconv.FormatInt(e.Size, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": e.Name}))
	w.WriteHeader(http.StatusOK)
	// A client that stops taking bytes is cut the same way.
	rc := http.NewResponseController(w)
	out := h.long.WatchWriterN(w, what, e.Size, func() { _ = rc.SetWriteDeadline(time.Now()) })
	_, _ = io.CopyN(out, file, e.Size)
}

func (h *handlers) upload(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	flags, err := bools(r, "overwrite", "parents")
	if err != nil {
		api.WriteError(w, err)
		return
	}
	opt := PutOptions{Overwrite: flags[0], Parents: flags[1]}
	if s := r.URL.Query().Get("sha256"); s != "" {
		sum, err := hex.DecodeString(s)
		if err != nil || len(sum) != 32 {
			api.WriteError(w, api.Errorf(api.ErrBadSHA256, "sha256 must be 64 hex digits, not %q", s))
			return
		}
		opt.SHA256 = sum
	}
	if r.ContentLength < 0 || r.Header.Get("Content-Length") == "" {
		api.WriteError(w, api.Errorf(api.ErrLengthRequired, "an upload needs Content-Length"))
		return
	}
	// Cheap refusals first, so a client learns them before sending.
	if _, err := h.v.destination(p, opt); err != nil {
		api.WriteError(w, err)
		return
	}
	if err := h.v.reserve(blocks(r.ContentLength)); err != nil {
		api.WriteError(w, err)
		return
	}
	what := "uploading " + p
	release, err := h.acquire(what)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	defer release()
	// A client that stops sending is cut after the lock's idle timeout:
	// the read fails, the .part file goes, the lock is given back.
	rc := http.NewResponseController(w)
	body := h.long.WatchN(r.Body, what, r.ContentLength, func() { _ = rc.SetReadDeadline(time.Now()) })
	e, created, err := h.v.Put(r.Context(), p, body, r.ContentLength, opt)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	api.WriteJSON(w, status, e)
}

func (h *handlers) mkdir(w http.ResponseWriter, r *http.Request) {
	var body MkdirRequest
	if err := api.Decode(r, &body, false); err != nil {
		api.WriteError(w, err)
		return
	}
	e, err := h.v.Mkdir(body.Path, body.Parents)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, e)
}

func decodeMove(r *http.Request) (MoveRequest, error) {
	var body MoveRequest
	if err := api.Decode(r, &body, false); err != nil {
		return body, err
	}
	if body.From == "" || body.To == "" {
		return body, api.Errorf(api.ErrBadPath, "from and to are required")
	}
	return body, nil
}

func (h *handlers) move(w http.ResponseWriter, r *http.Request) {
	body, err := decodeMove(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	e, err := h.v.Move(body.From, body.To, body.Overwrite)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, e)
}

func (h *handlers) copy(w http.ResponseWriter, r *http.Request) {
	body, err := decodeMove(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	release, err := h.acquire(fmt.Sprintf("copying %s", body.From))
	if err != nil {
		api.WriteError(w, err)
		return
	}
	defer release()
	e, err := h.v.Copy(r.Context(), body.From, body.To, body.Overwrite)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, e)
}
