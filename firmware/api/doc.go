// Package api holds the board API's shared vocabulary: the error type with
// its stable codes, and the JSON shapes of the resources the board serves.
//
// The firmware serves these types over HTTP and the host link; the gateway
// decodes board replies into the same types, so both sides agree on every
// field, including the ones the specification leaves open (see
// docs/spec-decisions.md).
package api
