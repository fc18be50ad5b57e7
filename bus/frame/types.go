package frame

import "fmt"

// Type is a frame's type byte. Requests use 0x01-0x7F; the reply to a
// request has the same value with the top bit set.
type Type uint8

// Message types.
const (
	TypePing      Type = 0x01 // protocol version and uptime
	TypeVersion   Type = 0x02 // firmware version string
	TypeStatus    Type = 0x03 // the 12-byte status block
	TypeScene     Type = 0x10 // apply the scene saved under a slot
	TypeEnd       Type = 0x11 // end the scene running to its end
	TypeScreenOff Type = 0x20 // clear the screen and sleep the panel
	TypeColour    Type = 0x21 // fill the screen with one colour
	TypeBacklight Type = 0x22 // set the backlight percent
	TypeLEDs      Type = 0x30 // change the LED strip
	TypeHolo      Type = 0x40 // start a holo motion
	TypeEventsSet Type = 0x50 // choose event kinds and push
	TypeEventsGet Type = 0x51 // fetch kept event records
	TypeEvent     Type = 0x70 // an event record pushed by the board (no reply)
	TypeRestart   Type = 0x7F // restart the board

	// ReplyBit is set in the type of every reply.
	ReplyBit Type = 0x80
)

var typeNames = map[Type]string{
	TypePing:      "PING",
	TypeVersion:   "VERSION",
	TypeStatus:    "STATUS",
	TypeScene:     "SCENE",
	TypeEnd:       "END",
	TypeScreenOff: "SCREEN_OFF",
	TypeColour:    "COLOUR",
	TypeBacklight: "BACKLIGHT",
	TypeLEDs:      "LEDS",
	TypeHolo:      "HOLO",
	TypeEventsSet: "EVENTS_SET",
	TypeEventsGet: "EVENTS_GET",
	TypeEvent:     "EVENT",
	TypeRestart:   "RESTART",
}

// Reply returns the type of the reply to t.
func (t Type) Reply() Type { return t | ReplyBit }

// IsReply reports whether t has the reply bit set.
func (t Type) IsReply() bool { return t&ReplyBit != 0 }

// Request returns t without the reply bit.
func (t Type) Request() Type { return t &^ ReplyBit }

// Known reports whether t, without the reply bit, is a message type of
// protocol 1. A reply to EVENT does not exist, so 0xF0 is not known.
func (t Type) Known() bool {
	_, ok := typeNames[t.Request()]
	return ok && t != TypeEvent.Reply()
}

// String returns the protocol name, "PING" or "PING_REPLY", or the value
// in hex for an unknown type.
func (t Type) String() string {
	if !t.Known() {
		return fmt.Sprintf("Type(0x%02X)", uint8(t))
	}
	name := typeNames[t.Request()]
	if t.IsReply() {
		return name + "_REPLY"
	}
	return name
}

// Status is the first byte of every reply payload.
type Status uint8

// Status values.
const (
	StatusOK          Status = 0
	StatusBadRequest  Status = 1
	StatusNotFound    Status = 2
	StatusNotPlayable Status = 3
	StatusNotReady    Status = 4
	StatusBusy        Status = 5
	StatusFailed      Status = 6
	StatusUnknownType Status = 7
	// StatusWorking is used on I2C only: the command still runs, read
	// RESULT again.
	StatusWorking Status = 0xFE
)

// JSON error codes returned by Status.Code for statuses that have no code
// of their own in the board's HTTP API.
const (
	CodeFailed      = "failed"
	CodeUnknownType = "unknown_type"
	CodeWorking     = "still_working"
)

// StatusForCode maps an error code of the board's JSON API to the status
// a native reply carries: "" is ok, and a code without a status of its own
// is StatusFailed.
func StatusForCode(code string) Status {
	switch code {
	case "":
		return StatusOK
	case "bad_request":
		return StatusBadRequest
	case "not_found", "unknown_scene":
		return StatusNotFound
	case "not_playable":
		return StatusNotPlayable
	case "not_ready":
		return StatusNotReady
	case "busy":
		return StatusBusy
	}
	return StatusFailed
}

// Code returns the JSON error code that stands for s: "" for ok,
// "bad_request", "not_found", "not_playable", "not_ready", "busy", and
// CodeFailed, CodeUnknownType, CodeWorking for the others. An unknown
// status is CodeFailed.
func (s Status) Code() string {
	switch s {
	case StatusOK:
		return ""
	case StatusBadRequest:
		return "bad_request"
	case StatusNotFound:
		return "not_found"
	case StatusNotPlayable:
		return "not_playable"
	case StatusNotReady:
		return "not_ready"
	case StatusBusy:
		return "busy"
	case StatusUnknownType:
		return CodeUnknownType
	case StatusWorking:
		return CodeWorking
	}
	return CodeFailed
}

// HTTPStatus returns the HTTP status the board's API uses for the same
// outcome: 200, 400, 404, 422, 409, 500; unknown type is 404 (a path not
// served over the link) and still working is 202.
func (s Status) HTTPStatus() int {
	switch s {
	case StatusOK:
		return 200
	case StatusBadRequest:
		return 400
	case StatusNotFound, StatusUnknownType:
		return 404
	case StatusNotPlayable:
		return 422
	case StatusNotReady, StatusBusy:
		return 409
	case StatusWorking:
		return 202
	}
	return 500
}

// String returns a short name: "ok", "bad request", ...
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusBadRequest:
		return "bad request"
	case StatusNotFound:
		return "not found"
	case StatusNotPlayable:
		return "not playable"
	case StatusNotReady:
		return "not ready"
	case StatusBusy:
		return "busy"
	case StatusFailed:
		return "failed"
	case StatusUnknownType:
		return "unknown type"
	case StatusWorking:
		return "still working"
	}
	return fmt.Sprintf("Status(0x%02X)", uint8(s))
}
