package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// DecodeBytes is Decode for a body already read (the host link uses it).
func DecodeBytes(b []byte, v any, optional bool) error {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return Errorf(ErrBadJSON, "a JSON object body is required")
	}
	if trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return Errorf(ErrBadJSON, "body is not valid JSON")
		}
		return Errorf(ErrBadRequest, "body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return Errorf(ErrBadJSON, "trailing data after the JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Errorf(ErrBadJSON, "body is not valid JSON: %v", err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return Errorf(ErrBadRequest, "%s must be %s, not %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return Errorf(ErrBadRequest, "%s", strings.TrimPrefix(err.Error(), "json: "))
	default:
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return Errorf(ErrBadRequest, "%v", err)
	}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	default:
		return "an object"
	}
}
