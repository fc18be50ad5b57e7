package boardapi

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a board API error: an HTTP status, a stable code clients branch
// on, and a message for people. It is written once as JSON
// {"error": code, "message": message}; the host link sends the same status
// and body on a reply line, and native frames map the code to a status byte
// (see bus/frame.StatusForCode).
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is lets errors.Is match two API errors by status and code, so a sentinel
// such as ErrBusy matches an Errorf(ErrBusy, ...) with its own message.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code && t.Status == e.Status
}

// Errorf returns a copy of the sentinel base with a formatted message.
func Errorf(base *Error, format string, args ...any) *Error {
	return &Error{Status: base.Status, Code: base.Code, Message: fmt.Sprintf(format, args...)}
}

// Wrap turns any error into an *Error: API errors pass through, anything
// else becomes 500 internal with the error's text.
func Wrap(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

// The error codes of the specification, one sentinel each. The message of a
// sentinel is the default; handlers use Errorf to say what went wrong.
var (
	ErrBadRequest    = &Error{http.StatusBadRequest, "bad_request", "malformed request"}
	ErrBadJSON       = &Error{http.StatusBadRequest, "bad_json", "body is not valid JSON"}
	ErrBadSHA256     = &Error{http.StatusBadRequest, "bad_sha256", "sha256 must be 64 hex digits"}
	ErrBadPath       = &Error{http.StatusBadRequest, "bad_path", "path is not allowed"}
	ErrNotADirectory = &Error{http.StatusBadRequest, "not_a_directory", "not a directory"}
	ErrIsADirectory  = &Error{http.StatusBadRequest, "is_a_directory", "is a directory"}

	ErrAuthRequired  = &Error{http.StatusUnauthorized, "auth_required", "password required"}
	ErrForbiddenHost = &Error{http.StatusForbidden, "forbidden_host", "Host header does not name this board"}

	ErrNotFound     = &Error{http.StatusNotFound, "not_found", "no such endpoint"}
	ErrNoSuchSlot   = &Error{http.StatusNotFound, "no_such_slot", "no such slot"}
	ErrNoFirmware   = &Error{http.StatusNotFound, "no_firmware", "no firmware on this channel"}
	ErrUnknownScene = &Error{http.StatusNotFound, "unknown_scene", "no such scene"}

	ErrBusy          = &Error{http.StatusConflict, "busy", "another long operation is running"}
	ErrNothingStaged = &Error{http.StatusConflict, "nothing_staged", "no image is staged"}
	ErrCannotDiscard = &Error{http.StatusConflict, "cannot_discard", "an activated image cannot be discarded"}
	ErrCancelled     = &Error{http.StatusConflict, "cancelled", "the update was cancelled"}
	ErrNotRunning    = &Error{http.StatusConflict, "not_running", "no scene is running to its end"}
	ErrExists        = &Error{http.StatusConflict, "exists", "already exists"}
	ErrNotEmpty      = &Error{http.StatusConflict, "not_empty", "directory is not empty"}
	ErrFull          = &Error{http.StatusConflict, "full", "the list is full"}
	ErrSlotTaken     = &Error{http.StatusConflict, "slot_taken", "another scene holds this slot"}
	ErrNotReady      = &Error{http.StatusConflict, "not_ready", "holo cannot move"}
	ErrPinInUse      = &Error{http.StatusConflict, "pin_in_use", "pin is used for something else"}
	// ErrBaseMismatch: a delta upload (PUT /ota/image?base=...) names a
	// base image the board does not run (extension ota-delta).
	ErrBaseMismatch = &Error{http.StatusConflict, "base_mismatch", "the board does not run the delta's base image"}

	ErrLengthRequired = &Error{http.StatusLengthRequired, "length_required", "Content-Length is required"}
	ErrTooLarge       = &Error{http.StatusRequestEntityTooLarge, "too_large", "too large"}
	ErrContentType    = &Error{http.StatusUnsupportedMediaType, "content_type", "Content-Type must be application/json"}

	ErrInvalidImage   = &Error{http.StatusUnprocessableEntity, "invalid_image", "not a usable firmware image"}
	ErrSHA256Mismatch = &Error{http.StatusUnprocessableEntity, "sha256_mismatch", "content does not match sha256"}
	// ErrDowngrade refuses a firmware image whose secure version is below
	// the board's (anti-rollback; not in the spec, docs/spec-decisions.md).
	ErrDowngrade   = &Error{http.StatusUnprocessableEntity, "downgrade_refused", "the image's secure version is below the board's"}
	ErrNotPlayable = &Error{http.StatusUnprocessableEntity, "not_playable", "the screen cannot show this file"}

	ErrOffline     = &Error{http.StatusServiceUnavailable, "offline", "no internet connection"}
	ErrUnreachable = &Error{http.StatusServiceUnavailable, "unreachable", "release site unreachable"}
	ErrStreamsBusy = &Error{http.StatusServiceUnavailable, "busy", "every event stream is taken"}
	ErrNoSpace     = &Error{http.StatusInsufficientStorage, "no_space", "volume is too full"}
	ErrInternal    = &Error{http.StatusInternalServerError, "internal", "internal error"}
)
