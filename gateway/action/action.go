// Package action holds the typed bodies of fleet actions: one Go type per
// action kind, decoded strictly, checked by the board's own rules, and
// turned into the board API request and (when the bytes can say exactly
// the same) the native frame request the action stands for.
//
// Every surface that takes an action decodes it here: the gRPC/REST API
// (DoAction), the MQTT bridge (set and group topics, the "do" request)
// and the fleet core, which derives the group frame from the same value.
// So a body one surface accepts is accepted by all, and a body the board
// would refuse is refused before anything is sent. That matters for group
// frames above all: boards on an RS485 line do not answer them, so a bad
// body sent to a group would fail silently on every board.
//
// # Kinds and bodies
//
//	kind         request             body type   native form (group frames)
//	scene_apply  POST /scenes/apply  SceneApply  SCENE, for {"slot": n} alone
//	scene_end    POST /scenes/end    SceneEnd    END
//	leds         PATCH /leds         LEDs        LEDS, when loop is given
//	screen_show  POST /screen/show   ScreenShow  COLOUR, for {"colour": c} alone
//	screen_off   DELETE /screen      ScreenOff   SCREEN_OFF
//	holo         POST /holo/motion   Holo        HOLO, when the numbers fit
//
// The body types are the board's own request types (bus/boardapi's
// LEDPatch, ShowRequest, MotionRequest, SceneApply: the contract both
// sides share), so the gateway and the board read a body the same way: unknown fields and wrong JSON types are refused, ranges are the
// board's (LED brightness 1-100, backlight 0-100, scene slot 1-255, holo x
// and y -1 to 1, or -2 to 2 for a nudge).
//
// A native form exists only when it means exactly what the JSON body means
// on the board; otherwise a group gets the body as one JSON line.
package action

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/frame"
)

// Errors of decoding and checking a body.
var (
	// ErrUnknownKind: the action kind is not one of Kinds.
	ErrUnknownKind = errors.New("action: unknown kind")
	// ErrInvalid: the body is not JSON, not an object, has an unknown
	// field or a field of the wrong type, or breaks one of the board's
	// rules for it. The error's text says which.
	ErrInvalid = errors.New("action: invalid body")
)

// Kind names what an action does.
type Kind string

// Action kinds.
const (
	KindSceneApply Kind = "scene_apply"
	KindSceneEnd   Kind = "scene_end"
	KindLEDs       Kind = "leds"
	KindScreenShow Kind = "screen_show"
	KindScreenOff  Kind = "screen_off"
	KindHolo       Kind = "holo"
)

// Kinds lists every action kind.
var Kinds = []Kind{KindSceneApply, KindSceneEnd, KindLEDs, KindScreenShow, KindScreenOff, KindHolo}

// Request is the board API request an action stands for.
type Request struct {
	Method string
	Path   string // as the spec's endpoint table writes it, without /api/v1
	Body   []byte // the JSON body; nil when the request has none
}

// Body is an action's body as a typed value.
type Body interface {
	// Kind is the action kind the body belongs to.
	Kind() Kind
	// Validate checks the body by the board's rules for its request.
	// The error matches ErrInvalid.
	Validate() error
	// Request is the board API request carrying the body, encoded from
	// the value (decoding its Body gives the value back).
	Request() Request
	// Native is the native frame request that does exactly what Request
	// does, when there is one. Only a valid body has a native form.
	Native() (frame.Request, bool)
}

// Decode reads body as the body of an action of kind: strictly (one JSON
// object, no unknown fields, right types; an empty body is {}) and then
// checked with Validate. Errors match ErrUnknownKind or ErrInvalid and
// say why.
func Decode(kind Kind, body []byte) (Body, error) {
	var b Body
	var err error
	switch kind {
	case KindSceneApply:
		b, err = decodeInto[SceneApply](kind, body)
	case KindSceneEnd:
		b, err = decodeInto[SceneEnd](kind, body)
	case KindLEDs:
		b, err = decodeInto[LEDs](kind, body)
	case KindScreenShow:
		b, err = decodeInto[ScreenShow](kind, body)
	case KindScreenOff:
		b, err = decodeInto[ScreenOff](kind, body)
	case KindHolo:
		b, err = decodeInto[Holo](kind, body)
	default:
		return nil, fmt.Errorf("%w: %q (scene_apply, scene_end, leds, screen_show, screen_off or holo)", ErrUnknownKind, kind)
	}
	if err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// decodeInto decodes body into a T as the board's strict decoder does.
func decodeInto[T Body](kind Kind, body []byte) (Body, error) {
	var v T
	if err := boardapi.DecodeBytes(body, &v, true); err != nil {
		return nil, invalid(kind, err)
	}
	return v, nil
}

// invalid wraps a firmware check's error as ErrInvalid with the board's
// message (not the board's error itself: the gateway refused it, no board
// answered).
func invalid(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ae *boardapi.Error
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, kind, msg)
}

// encode is the JSON of a body value. Only a number JSON cannot carry
// (NaN, infinity, which Validate refuses and Decode never gives) fails;
// it encodes as null, which every board refuses.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

var (
	_ Body = SceneApply{}
	_ Body = SceneEnd{}
	_ Body = LEDs{}
	_ Body = ScreenShow{}
	_ Body = ScreenOff{}
	_ Body = Holo{}
)
