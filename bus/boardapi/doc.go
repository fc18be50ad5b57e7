// Package boardapi is the board API's contract shared by both ends of it:
//
//   - the error type with the specification's stable codes (Error,
//     Errorf, the Err* sentinels) and the strict body decoding
//     (DecodeBytes);
//   - the request bodies a board accepts and their value rules, so the
//     gateway refuses exactly what a board would refuse before anything
//     is sent: LEDPatch (PATCH /leds) with the colour forms (ParseColour)
//     and modes, MotionRequest (POST /holo/motion), ShowRequest (POST
//     /screen/show) with the volume's path rules (CleanPath), Scene and
//     SceneApply (the scenes), and the native LEDS and HOLO payloads
//     (LEDPatchFromNative, MotionFromNative);
//   - the JSON shapes of the resources the gateway reads from boards (OTA
//     status and sessions, the application description, the host link's
//     settings and counters, fire and time replies);
//   - the mDNS service type boards announce and gateways browse for.
//
// It is a leaf: it imports only the standard library. The firmware serves
// and applies these types; the gateway and the rest of bus/ decode and
// check them. With the image format (bus/image) and the build description
// (bus/buildinfo) beside it, that is everything the two sides share, so
// neither imports the other: `make deps` checks every transitive import,
// tests included, and only gateway/demo (which runs simulated boards) and
// the test harnesses it names may reach firmware/.
//
// Fields the specification leaves open are decided in
// docs/spec-decisions.md; the board's openapi.json is generated from the
// firmware's routes, which use these types.
package boardapi
