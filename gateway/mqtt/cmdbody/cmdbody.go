// Package cmdbody reads the JSON bodies of MQTT commands the way every
// command handler does: one JSON object with its numbers kept exact, no
// key the command does not know, strings of bounded length, numbers in
// range. Every refusal wraps ErrBadCommand and says which field is wrong.
// The bridge (gateway/mqtt) and Home Assistant's light commands
// (gateway/mqtt/homeassistant) read their commands with it.
package cmdbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadCommand: a command's topic, size or body is not acceptable.
var ErrBadCommand = errors.New("mqtt: bad command")

// Object decodes payload as one JSON object, numbers kept exact.
func Object(payload []byte) (map[string]json.RawMessage, error) {
	p := bytes.TrimSpace(payload)
	if len(p) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: the payload is not a JSON object", ErrBadCommand)
	}
	return m, nil
}

// OnlyKeys refuses a key of m that is not one of keys; what names the
// command in the error.
func OnlyKeys(m map[string]json.RawMessage, what string, keys ...string) error {
	for k := range m {
		if !slices.Contains(keys, k) {
			return fmt.Errorf("%w: %s: unknown field %q (%s)", ErrBadCommand, what, k, strings.Join(keys, ", "))
		}
	}
	return nil
}

// String reads m[k] as a string of at most maxLen bytes; ok says whether
// k is there.
func String(m map[string]json.RawMessage, k string, maxLen int) (string, bool, error) {
	raw, ok := m[k]
	if !ok {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || len(s) > maxLen {
		return "", true, fmt.Errorf("%w: %s must be a string of at most %d bytes", ErrBadCommand, k, maxLen)
	}
	return s, true, nil
}

// Number reads m[k] as a number from lo to hi (a whole one when
// integer); ok says whether k is there.
func Number(m map[string]json.RawMessage, k string, lo, hi float64, integer bool) (float64, bool, error) {
	raw, ok := m[k]
	if !ok {
		return 0, false, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < lo || f > hi || integer && f != float64(int64(f)) {
		kind := "a number"
		if integer {
			kind = "an integer"
		}
		return 0, true, fmt.Errorf("%w: %s must be %s from %g to %g", ErrBadCommand, k, kind, lo, hi)
	}
	return f, true, nil
}

// Bool reads m[k] as true or false; ok says whether k is there.
func Bool(m map[string]json.RawMessage, k string) (bool, bool, error) {
	raw, ok := m[k]
	if !ok {
		return false, false, nil
	}
	var v bool
	if json.Unmarshal(raw, &v) != nil {
		return false, true, fmt.Errorf("%w: %s must be true or false", ErrBadCommand, k)
	}
	return v, true, nil
}
