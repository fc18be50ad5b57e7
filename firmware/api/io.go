package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// MaxJSONBody is the largest JSON request body the board accepts over
// HTTP (the specification leaves it open; see docs/spec-decisions.md).
// A longer body is answered 413 too_large.
const MaxJSONBody = 16 << 10

// WriteJSON writes v as the JSON reply with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, fmt.Errorf("encoding reply: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// WriteError writes err as {"error", "message"} with its status. Errors
// that are not *Error are reported as 500 internal.
func WriteError(w http.ResponseWriter, err error) {
	e := Wrap(err)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(b, '\n'))
}

// Decode reads the request's JSON body into v strictly: the body must be
// one JSON object no longer than MaxJSONBody, with no unknown fields and
// every field of the right type. It returns ErrBadJSON for syntax errors,
// ErrBadRequest for type errors and unknown fields, ErrTooLarge for a long
// body. An empty body decodes as {} when optional is true.
func Decode(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxJSONBody+1))
	if err != nil {
		return Errorf(ErrBadRequest, "reading body: %v", err)
	}
	if len(b) > MaxJSONBody {
		return Errorf(ErrTooLarge, "JSON body over %d bytes", MaxJSONBody)
	}
	return DecodeBytes(b, v, optional)
}

// DecodeBytes is Decode for a body already read (the host link uses it);
// the rule is bus/boardapi's, shared with the gateway.
func DecodeBytes(b []byte, v any, optional bool) error {
	return boardapi.DecodeBytes(b, v, optional)
}
