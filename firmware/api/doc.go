// Package api is the firmware's side of the board API: decoding request
// bodies with the specification's rules, writing replies and errors,
// routes, and running a handler in process for the host link.
//
// The vocabulary both ends share (the error type with its stable codes,
// the resources' JSON shapes) lives in the leaf package bus/boardapi; the
// names here are aliases of it, so firmware code reads api.ErrBusy.
package api
