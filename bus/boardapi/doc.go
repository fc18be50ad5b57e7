// Package boardapi is the board API's vocabulary shared by both ends of
// it: the error type with the specification's stable codes, and the JSON
// shapes of the resources the gateway reads from boards (OTA status and
// sessions, the application description, the host link's settings and
// counters).
//
// It is a leaf: it imports only the standard library, so the firmware
// (which serves these shapes) and the gateway and bus/ (which decode them)
// depend on it and never on each other. A dependency check run by
// `make lint` and `make test` keeps bus/ free of firmware/ and gateway/
// imports.
//
// Fields the specification leaves open are decided in
// docs/spec-decisions.md; the board's openapi.json is generated from the
// firmware's routes, which use these types.
package boardapi
