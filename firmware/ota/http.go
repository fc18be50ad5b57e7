package ota

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// queryBool reads a boolean query parameter: true/1 or false/0, def when
// absent.
func queryBool(r *http.Request, name string, def bool) (bool, error) {
	v, ok := r.URL.Query()[name]
	if !ok || len(v) == 0 {
		return def, nil
	}
	switch strings.ToLower(v[len(v)-1]) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return def, api.Errorf(api.ErrBadRequest, "%s must be true, false, 1 or 0, not %q", name, v[len(v)-1])
}

func boolParam(name, desc string) api.Param {
	return api.Param{Name: name, Type: "boolean", Description: desc + " (true, false, 1 or 0)"}
}

// sourceKey marks a request whose upload session has its own source.
type sourceKey struct{}

// WithSource marks ctx so that PUT /ota/image served with it records
// source as the session's source instead of upload: the console runs the
// same handler with SourceConsole.
func WithSource(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, sourceKey{}, source)
}

// SourceOf is the session source a request to PUT /ota/image records.
func SourceOf(r *http.Request) string {
	if s, ok := r.Context().Value(sourceKey{}).(string); ok && s != "" {
		return s
	}
	return SourceUpload
}

// Routes returns the firmware endpoints.
func (s *Service) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/ota", Link: true, Summary: "Slots, rollback, the update session and pull capabilities",
			Response: Status{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				st, err := s.Status()
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, st)
			})},
		{Method: http.MethodGet, Path: "/ota/image", Link: true, Summary: "The update session", Response: Session{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, s.Session())
			})},
		{Method: http.MethodPut, Path: "/ota/image", Raw: true, Response: Session{},
			Summary: "Upload an application image into the slot that is not running (Content-Length required)",
			Query: []api.Param{
				{Name: "sha256", Type: "string", Description: "hex SHA-256 the whole image must have"},
				boolParam("activate", "activate the image once staged"),
				boolParam("reboot", "with activate, restart a second after the reply"),
				boolParam("force", "accept an image built for another project"),
				{Name: "base", Type: "string", Description: "extension ota-delta: the body is a delta image from this running image (hex SHA-256, GET /ota's running slot sha256); the board rebuilds the whole image and checks it as an upload"},
			},
			Errors:  []*api.Error{api.ErrBadRequest, api.ErrBadSHA256, api.ErrBusy, api.ErrCancelled, api.ErrBaseMismatch, api.ErrLengthRequired, api.ErrTooLarge, api.ErrInvalidImage, api.ErrDowngrade, api.ErrSHA256Mismatch},
			Handler: http.HandlerFunc(s.serveUpload)},
		{Method: http.MethodDelete, Path: "/ota/image", Link: true, Response: Session{},
			Summary: "Cancel the update in progress, or forget a staged or failed one",
			Errors:  []*api.Error{api.ErrCannotDiscard},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sess, err := s.Discard()
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, sess)
			})},
		{Method: http.MethodPost, Path: "/ota/activate", Link: true, Request: ActivateRequest{}, Response: ActivateResult{},
			Status:  http.StatusAccepted,
			Summary: "Make the staged image (or a slot) the boot image; restart a second later unless reboot is false",
			Errors:  []*api.Error{api.ErrNoSuchSlot, api.ErrNothingStaged, api.ErrBusy, api.ErrInvalidImage, api.ErrDowngrade},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req ActivateRequest
				if err := api.Decode(r, &req, true); err != nil {
					api.WriteError(w, err)
					return
				}
				res, err := s.Activate(req.Slot, req.Reboot == nil || *req.Reboot)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusAccepted, res)
			})},
		{Method: http.MethodPost, Path: "/ota/pull", Link: true, Request: PullRequest{}, Response: Session{},
			Status:  http.StatusAccepted,
			Summary: "Download an image from a release channel or URL into the slot that is not running",
			Errors:  []*api.Error{api.ErrBadRequest, api.ErrBusy, api.ErrOffline, api.ErrUnreachable, api.ErrNoFirmware, api.ErrTooLarge, api.ErrSHA256Mismatch, api.ErrBadSHA256, api.ErrBaseMismatch, api.ErrInvalidImage},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req PullRequest
				if err := api.Decode(r, &req, false); err != nil {
					api.WriteError(w, err)
					return
				}
				sess, err := s.Pull(r.Context(), req)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusAccepted, sess)
			})},
		{Method: http.MethodGet, Path: "/ota/check", Link: true, Response: CheckResult{},
			Summary: "What a release channel (or manifest URL) offers; answers are kept five minutes",
			Query: []api.Param{
				{Name: "channel", Type: "string", Description: "release channel, default latest"},
				{Name: "url", Type: "string", Description: "a release manifest's https URL instead of a channel"},
				boolParam("refresh", "look again instead of answering from the five-minute cache"),
			},
			Errors: []*api.Error{api.ErrBadRequest, api.ErrNoFirmware, api.ErrOffline, api.ErrUnreachable},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				refresh, err := queryBool(r, "refresh", false)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				q := r.URL.Query()
				if q.Get("channel") != "" && q.Get("url") != "" {
					api.WriteError(w, api.Errorf(api.ErrBadRequest, "give channel or url, not both"))
					return
				}
				res, err := s.Check(r.Context(), q.Get("channel"), q.Get("url"), refresh)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, res)
			})},
	}
}

func (s *Service) serveUpload(w http.ResponseWriter, r *http.Request) {
	var opt Options
	var err error
	if opt.Activate, err = queryBool(r, "activate", false); err == nil {
		if opt.Reboot, err = queryBool(r, "reboot", true); err == nil {
			opt.Force, err = queryBool(r, "force", false)
		}
	}
	if err != nil {
		api.WriteError(w, err)
		return
	}
	opt.SHA256 = r.URL.Query().Get("sha256")
	rc := http.NewResponseController(w)
	abort := func() { _ = rc.SetReadDeadline(time.Now()) }
	length := r.ContentLength
	if len(r.TransferEncoding) > 0 {
		length = -1
	}
	// A client that stops sending is cut after the long-operation lock's
	// idle timeout, one that trickles below its minimum rate or runs past
	// the deadline of its length (the slot's size when undeclared) too:
	// the session fails and the lock is given back.
	declared := length
	if declared < 0 || declared > flash.SlotSize {
		declared = flash.SlotSize
	}
	body := s.cfg.Long.WatchN(r.Body, "firmware upload", declared, abort)
	var sess Session
	if _, delta := r.URL.Query()["base"]; delta {
		sess, err = s.UploadDelta(SourceOf(r), body, length, r.URL.Query().Get("base"), opt, abort)
	} else {
		sess, err = s.Upload(SourceOf(r), body, length, opt, abort)
	}
	if err != nil {
		// Do not read on: the client learns at once and the connection
		// closes rather than draining a body the board does not want.
		w.Header().Set("Connection", "close")
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, sess)
}
