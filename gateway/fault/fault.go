// Package fault is the gateway's one classification of errors: every
// error a surface answers with falls in one Class (invalid argument, not
// found, denied, busy, unavailable, ...), and one table gives each class
// its form on every surface: the HTTP status of the REST API, the gRPC
// code, the status of an MQTT response and the status of an OSC /reply.
//
//	class            HTTP  gRPC                MQTT   OSC
//	OK               200   OK                  ok     ok
//	Invalid          400   InvalidArgument     error  error
//	Unauthenticated  401   Unauthenticated     error  denied
//	Denied           403   PermissionDenied    error  denied
//	NotFound         404   NotFound            error  error
//	Exists           409   AlreadyExists       error  error
//	Precondition     412   FailedPrecondition  error  error
//	Busy             429   ResourceExhausted   error  error
//	Canceled         499   Canceled            error  error
//	Internal         500   Internal            error  error
//	Unimplemented    501   Unimplemented       error  error
//	Unavailable      503   Unavailable         error  error
//	Deadline         504   DeadlineExceeded    error  error
//
// A domain package says the class of each of its sentinel errors by
// declaring it with New (fleet.ErrUnknownBoard is NotFound,
// fleet.ErrBadAction Invalid, auth.ErrForbidden Denied, ...); errors.Is
// works on them as on any sentinel, and their text is the text given.
// Of finds the class of any error: the class of the outermost classified
// error it wraps (the code that wrapped last knows best: rollout's
// ErrArtifact wrapping the artifact store's ErrNotFound is a bad
// argument of the caller's, not a missing page; fmt.Errorf's "%w: %w"
// puts the outer first), at a join of several errors (errors.Join) the
// gravest of theirs (a board unreachable on one route and
// answering nonsense on the other is unavailable), then a context's
// deadline or cancellation, and Internal for the rest.
//
// The package imports nothing of the gateway, so that every package can
// declare its errors here and every surface read them; what a surface
// adds to a class (the REST body's snake_case code, gRPC error details,
// an OSC reply's data) stays with the surface.
package fault

import (
	"context"
	"errors"
	"net/http"
	"reflect"

	"google.golang.org/grpc/codes"
)

// Class is a kind of failure, as every surface tells it to its clients.
type Class uint8

// Classes.
const (
	// OK is no failure (the class of a nil error).
	OK Class = iota
	// Invalid: the request is malformed or breaks a rule; the caller
	// must change it.
	Invalid
	// Unauthenticated: no credentials, or bad ones.
	Unauthenticated
	// Denied: the caller's role does not allow it.
	Denied
	// NotFound: what the request names does not exist.
	NotFound
	// Exists: what the request creates exists already.
	Exists
	// Precondition: not allowed in the present state (a rollout running,
	// an artifact in use, a path the host link does not serve).
	Precondition
	// Busy: a limit is reached; a later retry may pass.
	Busy
	// Canceled: the caller went away.
	Canceled
	// Internal: the gateway failed, or the error is not classified.
	Internal
	// Unimplemented: this gateway was built or configured without it.
	Unimplemented
	// Unavailable: what is needed cannot be reached now (a board, a
	// gateway of the cluster, a closed engine).
	Unavailable
	// Deadline: the time given ran out.
	Deadline
	nClasses
)

// Form is a class on every surface.
type Form struct {
	Name string     // the class's name
	HTTP int        // the REST API's status
	GRPC codes.Code // the gRPC code
	MQTT string     // the "status" of an MQTT bridge/response message
	OSC  string     // the status of an OSC /reply
}

// Reply statuses of MQTT responses and OSC replies.
const (
	StatusOK     = "ok"
	StatusError  = "error"
	StatusDenied = "denied"
)

// forms is the table: one row a class.
var forms = [nClasses]Form{
	OK:              {"ok", http.StatusOK, codes.OK, StatusOK, StatusOK},
	Invalid:         {"invalid", http.StatusBadRequest, codes.InvalidArgument, StatusError, StatusError},
	Unauthenticated: {"unauthenticated", http.StatusUnauthorized, codes.Unauthenticated, StatusError, StatusDenied},
	Denied:          {"denied", http.StatusForbidden, codes.PermissionDenied, StatusError, StatusDenied},
	NotFound:        {"not_found", http.StatusNotFound, codes.NotFound, StatusError, StatusError},
	Exists:          {"exists", http.StatusConflict, codes.AlreadyExists, StatusError, StatusError},
	Precondition:    {"precondition", http.StatusPreconditionFailed, codes.FailedPrecondition, StatusError, StatusError},
	Busy:            {"busy", http.StatusTooManyRequests, codes.ResourceExhausted, StatusError, StatusError},
	Canceled:        {"canceled", StatusClientClosed, codes.Canceled, StatusError, StatusError},
	Internal:        {"internal", http.StatusInternalServerError, codes.Internal, StatusError, StatusError},
	Unimplemented:   {"unimplemented", http.StatusNotImplemented, codes.Unimplemented, StatusError, StatusError},
	Unavailable:     {"unavailable", http.StatusServiceUnavailable, codes.Unavailable, StatusError, StatusError},
	Deadline:        {"deadline", http.StatusGatewayTimeout, codes.DeadlineExceeded, StatusError, StatusError},
}

// StatusClientClosed is the HTTP status of a request its client gave up
// (nginx's 499; no standard status says it).
const StatusClientClosed = 499

// Classes lists every class, in the table's order.
func Classes() []Class {
	out := make([]Class, nClasses)
	for i := range out {
		out[i] = Class(i)
	}
	return out
}

// Form is the class's row of the table; an unknown class is Internal's.
func (c Class) Form() Form {
	if c >= nClasses {
		return forms[Internal]
	}
	return forms[c]
}

// String is the class's name.
func (c Class) String() string { return c.Form().Name }

// HTTP is the class's REST status.
func (c Class) HTTP() int { return c.Form().HTTP }

// GRPC is the class's gRPC code.
func (c Class) GRPC() codes.Code { return c.Form().GRPC }

// MQTT is the status of an MQTT response of the class.
func (c Class) MQTT() string { return c.Form().MQTT }

// OSC is the status of an OSC /reply of the class.
func (c Class) OSC() string { return c.Form().OSC }

// FromCode is the class a gRPC code stands for: the class whose code it
// is, and for the codes no class uses, the nearest (OutOfRange is
// Invalid, Aborted Exists, Unknown and DataLoss Internal).
func FromCode(code codes.Code) Class {
	for c, f := range forms {
		if f.GRPC == code {
			return Class(c)
		}
	}
	switch code {
	case codes.OutOfRange:
		return Invalid
	case codes.Aborted:
		return Exists
	}
	return Internal
}

// Error is a sentinel error with its class. Declare one with New.
type Error struct {
	class Class
	text  string
}

// New returns a sentinel error of class c whose text is text.
func New(c Class, text string) *Error { return &Error{class: c, text: text} }

// Error is the text given to New.
func (e *Error) Error() string { return e.text }

// Class is the error's class.
func (e *Error) Class() Class { return e.class }

// Classified is an error that says its class (an *Error, or a type of a
// domain package's own).
type Classified interface {
	error
	Class() Class
}

// Of is the class of err (see the package doc): OK for nil, the
// outermost classified error's class, the gravest at a join, a context's
// deadline or cancellation, else Internal.
func Of(err error) Class {
	if err == nil {
		return OK
	}
	if c, ok := classified(err); ok {
		return c
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Deadline
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Internal
}

// gravity orders classes at a join of errors, gravest first: what the
// caller cannot fix by changing the request comes before what it can.
var gravity = [nClasses]int{
	NotFound: 1, Unavailable: 2, Precondition: 3, Internal: 4, Unimplemented: 5,
	Unauthenticated: 6, Denied: 7, Exists: 8, Invalid: 9, Busy: 10, Deadline: 11, Canceled: 12,
}

// joinType is the type of errors.Join's errors.
var joinType = reflect.TypeOf(errors.Join(errors.New("")))

// classified walks err's tree outermost first for a Classified error.
func classified(err error) (Class, bool) {
	for err != nil {
		if c, ok := err.(Classified); ok {
			return c.Class(), true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			// fmt.Errorf("%w: %w", outer, inner) says the outer first;
			// errors.Join's parts are peers.
			join := reflect.TypeOf(err) == joinType
			best, found := Class(0), false
			for _, e := range u.Unwrap() {
				c, ok := classified(e)
				if ok && !join {
					return c, true
				}
				if ok && (!found || gravity[c] < gravity[best]) {
					best, found = c, true
				}
			}
			return best, found
		default:
			return 0, false
		}
	}
	return 0, false
}
