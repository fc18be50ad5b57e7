package boardapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// DecodeBytes reads a JSON request body into v the way the board does:
// the body must be one JSON object with no unknown fields and every field
// of the right type. It returns ErrBadJSON for syntax errors and trailing
// data, ErrBadRequest for type errors, unknown fields and non-objects. An
// empty body decodes as {} when optional is true. The gateway checks
// action bodies with the same rule before it sends them.
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
