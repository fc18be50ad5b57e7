package boardapi

import "errors"

// Errors of the request rules in this package (the bodies of PATCH /leds,
// POST /holo/motion, POST /screen/show and the scenes). A rule's error is
// also an *Error (bad_request, or bad_path for a volume path), so callers
// may test either with errors.Is.
var (
	// ErrColour: a colour that is not #rrggbb, R,G,B or a known name.
	ErrColour = errors.New("boardapi: bad colour")
	// ErrLEDMode: an LED mode that is not off, solid, wipe, rainbow or
	// flicker.
	ErrLEDMode = errors.New("boardapi: unknown LED mode")
	// ErrBrightness: an LED brightness outside 1-100.
	ErrBrightness = errors.New("boardapi: brightness out of range")
	// ErrMotion: a holo motion request the board does not accept.
	ErrMotion = errors.New("boardapi: bad motion")
)

// RuleError is an *Error that also matches one of the sentinels above
// (or a package's own) with errors.Is: the API's status and code for the
// client, the sentinel for the caller that branches on the rule.
type RuleError struct {
	Err      *Error
	Sentinel error
}

func (e *RuleError) Error() string   { return e.Err.Message }
func (e *RuleError) Unwrap() []error { return []error{e.Err, e.Sentinel} }

// Rulef returns a *RuleError: base's status and code with a formatted
// message, matching sentinel.
func Rulef(sentinel error, base *Error, format string, args ...any) error {
	return &RuleError{Errorf(base, format, args...), sentinel}
}

// PartError gives err's status and code with a message naming the part
// of a composite body (a scene's screen, leds or holo).
func PartError(part string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		e = Wrap(err)
	}
	return &Error{Status: e.Status, Code: e.Code, Message: part + ": " + e.Message}
}
