package frame

import (
	"encoding"
	"encoding/binary"
	"fmt"
)

// ProtocolVersion is the host link protocol version this package speaks.
const ProtocolVersion = 1

// Limits of reply bodies.
const (
	// ReplyHeaderLen is the size of status and pending.
	ReplyHeaderLen = 2
	// MaxVersionLen is the longest firmware version string.
	MaxVersionLen = 32
	// MaxRecords is the most records one EVENTS_GET reply carries.
	MaxRecords = 5
)

// Message is a payload or a part of one, as a pointer: a request, a
// reply body, a status block or an event record. AppendBinary checks the
// fields' ranges before it appends; UnmarshalBinary checks the length and
// ranges and ignores bytes past the fields it knows.
type Message interface {
	encoding.BinaryAppender
	encoding.BinaryUnmarshaler
}

// Request is a request payload that knows its message type. Every
// request struct satisfies it as a value, and so does Record (an EVENT
// frame's payload).
type Request interface {
	encoding.BinaryAppender
	Type() Type
}

// Marshal returns the encoding of m in a new slice.
func Marshal(m encoding.BinaryAppender) ([]byte, error) { return m.AppendBinary(nil) }

// PingRequest asks for the protocol version and uptime. It has no fields.
type PingRequest struct{}

// Type returns TypePing.
func (PingRequest) Type() Type { return TypePing }

// AppendBinary appends nothing.
func (PingRequest) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*PingRequest) UnmarshalBinary([]byte) error { return nil }

// VersionRequest asks for the firmware version. It has no fields.
type VersionRequest struct{}

// Type returns TypeVersion.
func (VersionRequest) Type() Type { return TypeVersion }

// AppendBinary appends nothing.
func (VersionRequest) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*VersionRequest) UnmarshalBinary([]byte) error { return nil }

// StatusRequest asks for the status block. It has no fields.
type StatusRequest struct{}

// Type returns TypeStatus.
func (StatusRequest) Type() Type { return TypeStatus }

// AppendBinary appends nothing.
func (StatusRequest) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*StatusRequest) UnmarshalBinary([]byte) error { return nil }

// EndRequest ends the scene running to its end (POST /scenes/end). It has no fields.
type EndRequest struct{}

// Type returns TypeEnd.
func (EndRequest) Type() Type { return TypeEnd }

// AppendBinary appends nothing.
func (EndRequest) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*EndRequest) UnmarshalBinary([]byte) error { return nil }

// ScreenOffRequest clears the screen and sleeps the panel (DELETE /screen). It has no fields.
type ScreenOffRequest struct{}

// Type returns TypeScreenOff.
func (ScreenOffRequest) Type() Type { return TypeScreenOff }

// AppendBinary appends nothing.
func (ScreenOffRequest) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*ScreenOffRequest) UnmarshalBinary([]byte) error { return nil }

// RestartRequest restarts the board after its reply. It has no fields.
type RestartRequest struct{}

// Type returns TypeRestart.
func (RestartRequest) Type() Type { return TypeRestart }

// AppendBinary appends nothing.
func (RestartRequest) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*RestartRequest) UnmarshalBinary([]byte) error { return nil }

// SceneRequest applies the saved scene with a slot (POST /scenes/apply).
//
//	byte 0    slot (1-255)
//	byte 1-8  clip_start i64 (optional; extension clip-sync): the start of
//	          the scene's clip on the board's aligned clock, Unix µs
//
// The clip start is a holofleet field appended to the specification's
// one-byte payload (a later revision's field, which a decoder of the
// one byte ignores): a line's boards taking one group frame start the
// scene's clip on one timeline. 0 (and a payload of one byte) is none.
type SceneRequest struct {
	Slot        uint8
	ClipStartUS int64
}

// Type returns TypeScene.
func (SceneRequest) Type() Type { return TypeScene }

// AppendBinary appends the slot, and the clip start when it is set; slot
// 0 is out of range.
func (r SceneRequest) AppendBinary(b []byte) ([]byte, error) {
	if r.Slot == 0 {
		return b, fmt.Errorf("SCENE: slot 0: %w", ErrRange)
	}
	b = append(b, r.Slot)
	if r.ClipStartUS != 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(r.ClipStartUS))
	}
	return b, nil
}

// UnmarshalBinary reads the slot, and the clip start when the payload
// has its eight bytes (fewer are a one-byte SCENE with bytes to ignore).
func (r *SceneRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 1 {
		return fmt.Errorf("SCENE: %w", ErrShort)
	}
	if b[0] == 0 {
		return fmt.Errorf("SCENE: slot 0: %w", ErrRange)
	}
	r.Slot, r.ClipStartUS = b[0], 0
	if len(b) >= 9 {
		r.ClipStartUS = int64(binary.LittleEndian.Uint64(b[1:9]))
	}
	return nil
}

// ColourRequest fills the screen with one colour.
//
//	bytes 0-2  r, g, b
type ColourRequest struct {
	R, G, B uint8
}

// Type returns TypeColour.
func (ColourRequest) Type() Type { return TypeColour }

// AppendBinary appends r, g, b.
func (r ColourRequest) AppendBinary(b []byte) ([]byte, error) {
	return append(b, r.R, r.G, r.B), nil
}

// UnmarshalBinary reads r, g, b.
func (r *ColourRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 3 {
		return fmt.Errorf("COLOUR: %w", ErrShort)
	}
	r.R, r.G, r.B = b[0], b[1], b[2]
	return nil
}

// BacklightRequest sets the backlight.
//
//	byte 0  percent (0-100)
type BacklightRequest struct {
	Percent uint8
}

// Type returns TypeBacklight.
func (BacklightRequest) Type() Type { return TypeBacklight }

// AppendBinary appends the percent.
func (r BacklightRequest) AppendBinary(b []byte) ([]byte, error) {
	if r.Percent > 100 {
		return b, fmt.Errorf("BACKLIGHT: percent %d: %w", r.Percent, ErrRange)
	}
	return append(b, r.Percent), nil
}

// UnmarshalBinary reads the percent.
func (r *BacklightRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 1 {
		return fmt.Errorf("BACKLIGHT: %w", ErrShort)
	}
	if b[0] > 100 {
		return fmt.Errorf("BACKLIGHT: percent %d: %w", b[0], ErrRange)
	}
	r.Percent = b[0]
	return nil
}

// LEDFlags is the LEDS request's flags byte.
type LEDFlags uint8

// LED flags.
const (
	LEDLoop      LEDFlags = 1 << 0 // the effect loops
	LEDNewColour LEDFlags = 1 << 1 // r, g, b is a new colour; otherwise ignored
	ledFlagsAll           = LEDLoop | LEDNewColour
)

// LEDsRequest changes the LED strip.
//
//	byte 0     mode (LEDMode 0-4, or 0xFF to keep)
//	bytes 1-3  r, g, b (used when flags has LEDNewColour)
//	byte 4     brightness (1-100, 0 keeps it)
//	byte 5     flags (LEDFlags)
type LEDsRequest struct {
	Mode       LEDMode
	R, G, B    uint8
	Brightness uint8
	Flags      LEDFlags
}

// Type returns TypeLEDs.
func (LEDsRequest) Type() Type { return TypeLEDs }

func (r LEDsRequest) check() error {
	switch {
	case r.Mode != LEDKeep && !known(ledModeNames, r.Mode):
		return fmt.Errorf("LEDS: mode %d: %w", r.Mode, ErrRange)
	case r.Brightness > 100:
		return fmt.Errorf("LEDS: brightness %d: %w", r.Brightness, ErrRange)
	case r.Flags&^ledFlagsAll != 0:
		return fmt.Errorf("LEDS: flags 0x%02X: %w", uint8(r.Flags), ErrRange)
	}
	return nil
}

// AppendBinary appends the six bytes.
func (r LEDsRequest) AppendBinary(b []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return b, err
	}
	return append(b, byte(r.Mode), r.R, r.G, r.B, r.Brightness, byte(r.Flags)), nil
}

// UnmarshalBinary reads the six bytes.
func (r *LEDsRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 6 {
		return fmt.Errorf("LEDS: %w", ErrShort)
	}
	v := LEDsRequest{Mode: LEDMode(b[0]), R: b[1], G: b[2], B: b[3], Brightness: b[4], Flags: LEDFlags(b[5])}
	if err := v.check(); err != nil {
		return err
	}
	*r = v
	return nil
}

// Bounds of HOLO x and y for MotionMove; MotionNudge takes the whole s8
// range and other motions ignore them.
const (
	MinMove = -100
	MaxMove = 100
)

// HoloRequest starts a holo motion. Zero in DurationMS, Range or Count
// means the motion's default.
//
//	byte 0     motion (Motion 0-9)
//	byte 1     x s8 (-100..100 for move)
//	byte 2     y s8 (-100..100 for move)
//	bytes 3-4  duration_ms u16
//	byte 5     range
//	byte 6     count
type HoloRequest struct {
	Motion     Motion
	X, Y       int8
	DurationMS uint16
	Range      uint8
	Count      uint8
}

// Type returns TypeHolo.
func (HoloRequest) Type() Type { return TypeHolo }

func (r HoloRequest) check() error {
	if !known(motionNames, r.Motion) {
		return fmt.Errorf("HOLO: motion %d: %w", r.Motion, ErrRange)
	}
	if r.Motion == MotionMove && (r.X < MinMove || r.X > MaxMove || r.Y < MinMove || r.Y > MaxMove) {
		return fmt.Errorf("HOLO: move to %d,%d: %w", r.X, r.Y, ErrRange)
	}
	return nil
}

// AppendBinary appends the seven bytes.
func (r HoloRequest) AppendBinary(b []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return b, err
	}
	b = append(b, byte(r.Motion), byte(r.X), byte(r.Y))
	b = binary.LittleEndian.AppendUint16(b, r.DurationMS)
	return append(b, r.Range, r.Count), nil
}

// UnmarshalBinary reads the seven bytes.
func (r *HoloRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 7 {
		return fmt.Errorf("HOLO: %w", ErrShort)
	}
	v := HoloRequest{
		Motion:     Motion(b[0]),
		X:          int8(b[1]),
		Y:          int8(b[2]),
		DurationMS: binary.LittleEndian.Uint16(b[3:]),
		Range:      b[5],
		Count:      b[6],
	}
	if err := v.check(); err != nil {
		return err
	}
	*r = v
	return nil
}

// EventsSetRequest chooses which event kinds the link reports and
// whether they are pushed (UART only) or kept to be fetched.
//
//	byte 0  kinds (KindMask)
//	byte 1  push (0 or 1)
type EventsSetRequest struct {
	Kinds KindMask
	Push  bool
}

// Type returns TypeEventsSet.
func (EventsSetRequest) Type() Type { return TypeEventsSet }

// AppendBinary appends kinds and push.
func (r EventsSetRequest) AppendBinary(b []byte) ([]byte, error) {
	return append(b, byte(r.Kinds), boolByte(r.Push)), nil
}

// UnmarshalBinary reads kinds and push; push must be 0 or 1.
func (r *EventsSetRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("EVENTS_SET: %w", ErrShort)
	}
	if b[1] > 1 {
		return fmt.Errorf("EVENTS_SET: push %d: %w", b[1], ErrRange)
	}
	r.Kinds, r.Push = KindMask(b[0]), b[1] == 1
	return nil
}

// EventsGetRequest fetches event records. After 0 returns those not yet
// given to the host; otherwise the kept ones numbered after After.
//
//	bytes 0-1  after u16
type EventsGetRequest struct {
	After uint16
}

// Type returns TypeEventsGet.
func (EventsGetRequest) Type() Type { return TypeEventsGet }

// AppendBinary appends after.
func (r EventsGetRequest) AppendBinary(b []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint16(b, r.After), nil
}

// UnmarshalBinary reads after.
func (r *EventsGetRequest) UnmarshalBinary(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("EVENTS_GET: %w", ErrShort)
	}
	r.After = binary.LittleEndian.Uint16(b)
	return nil
}

// Header opens every reply payload.
//
//	byte 0  status (Status)
//	byte 1  pending: happenings of the host's kinds not yet given (0-255)
type Header struct {
	Status  Status
	Pending uint8
}

// AppendBinary appends status and pending.
func (h Header) AppendBinary(b []byte) ([]byte, error) {
	return append(b, byte(h.Status), h.Pending), nil
}

// UnmarshalBinary reads status and pending.
func (h *Header) UnmarshalBinary(b []byte) error {
	if len(b) < ReplyHeaderLen {
		return fmt.Errorf("reply header: %w", ErrShort)
	}
	h.Status, h.Pending = Status(b[0]), b[1]
	return nil
}

// SplitReply splits a reply payload into its header and its body. The
// body aliases p.
func SplitReply(p []byte) (Header, []byte, error) {
	var h Header
	if err := h.UnmarshalBinary(p); err != nil {
		return h, nil, err
	}
	return h, p[ReplyHeaderLen:], nil
}

// AppendReplyPayload appends a reply payload: the header, then body when
// the status is ok (body may be nil for a reply without one). A reply
// whose status is not ok carries the header alone.
func AppendReplyPayload(dst []byte, h Header, body encoding.BinaryAppender) ([]byte, error) {
	start := len(dst)
	dst, _ = h.AppendBinary(dst)
	if h.Status != StatusOK || body == nil {
		return dst, nil
	}
	dst, err := body.AppendBinary(dst)
	if err != nil {
		return dst[:start], err
	}
	if len(dst)-start > MaxPayload {
		return dst[:start], fmt.Errorf("reply payload of %d bytes: %w", len(dst)-start, ErrTooLong)
	}
	return dst, nil
}

// Empty is the body of the replies that carry only the header: SCENE,
// END, SCREEN_OFF, COLOUR, BACKLIGHT, LEDS, HOLO and RESTART.
type Empty struct{}

// AppendBinary appends nothing.
func (Empty) AppendBinary(b []byte) ([]byte, error) { return b, nil }

// UnmarshalBinary accepts any bytes and reads none.
func (*Empty) UnmarshalBinary([]byte) error { return nil }

// PingReply is the body of the PING reply.
//
//	byte 0     protocol (1)
//	bytes 1-4  uptime_s u32
type PingReply struct {
	Protocol uint8
	UptimeS  uint32
}

// AppendBinary appends protocol and uptime.
func (r PingReply) AppendBinary(b []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint32(append(b, r.Protocol), r.UptimeS), nil
}

// UnmarshalBinary reads protocol and uptime.
func (r *PingReply) UnmarshalBinary(b []byte) error {
	if len(b) < 5 {
		return fmt.Errorf("PING reply: %w", ErrShort)
	}
	r.Protocol, r.UptimeS = b[0], binary.LittleEndian.Uint32(b[1:])
	return nil
}

// VersionReply is the body of the VERSION reply: the firmware version,
// printable ASCII, up to 32 bytes, filling the rest of the payload.
type VersionReply struct {
	Version string
}

// CheckVersion reports whether v can be sent as a firmware version:
// printable ASCII of at most 32 bytes.
func CheckVersion(v string) error { return checkVersion(v) }

func checkVersion[T string | []byte](v T) error {
	if len(v) > MaxVersionLen {
		return fmt.Errorf("version of %d bytes: %w", len(v), ErrTooLong)
	}
	for i := range len(v) {
		if c := v[i]; c < 0x20 || c > 0x7E {
			return fmt.Errorf("version byte 0x%02X: %w", c, ErrRange)
		}
	}
	return nil
}

// AppendBinary appends the version string.
func (r VersionReply) AppendBinary(b []byte) ([]byte, error) {
	if err := checkVersion(r.Version); err != nil {
		return b, fmt.Errorf("VERSION reply: %w", err)
	}
	return append(b, r.Version...), nil
}

// UnmarshalBinary reads the version string: all of b.
func (r *VersionReply) UnmarshalBinary(b []byte) error {
	if err := checkVersion(b); err != nil {
		return fmt.Errorf("VERSION reply: %w", err)
	}
	r.Version = string(b)
	return nil
}

// StatusReply is the body of the STATUS reply: the status block.
type StatusReply struct {
	Block StatusBlock
}

// AppendBinary appends the status block.
func (r StatusReply) AppendBinary(b []byte) ([]byte, error) { return r.Block.AppendBinary(b) }

// UnmarshalBinary reads the status block; a longer block is accepted.
func (r *StatusReply) UnmarshalBinary(b []byte) error { return r.Block.UnmarshalBinary(b) }

// EventsSetReply is the body of the EVENTS_SET reply.
//
//	bytes 0-1  seq u16: the latest event's number
type EventsSetReply struct {
	Seq uint16
}

// AppendBinary appends seq.
func (r EventsSetReply) AppendBinary(b []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint16(b, r.Seq), nil
}

// UnmarshalBinary reads seq.
func (r *EventsSetReply) UnmarshalBinary(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("EVENTS_SET reply: %w", ErrShort)
	}
	r.Seq = binary.LittleEndian.Uint16(b)
	return nil
}

// EventsGetReply is the body of the EVENTS_GET reply. Five records mean
// more may be waiting: ask again.
//
//	byte 0  lost: happenings after `after` no longer kept
//	byte 1  count (0-5)
//	then    count records of 8 bytes
type EventsGetReply struct {
	Lost    uint8
	Records []Record
}

// AppendBinary appends lost, count and the records.
func (r EventsGetReply) AppendBinary(b []byte) ([]byte, error) {
	if len(r.Records) > MaxRecords {
		return b, fmt.Errorf("EVENTS_GET reply: %d records: %w", len(r.Records), ErrTooLong)
	}
	start := len(b)
	b = append(b, r.Lost, byte(len(r.Records)))
	for _, rec := range r.Records {
		var err error
		if b, err = rec.AppendBinary(b); err != nil {
			return b[:start], fmt.Errorf("EVENTS_GET reply: %w", err)
		}
	}
	return b, nil
}

// UnmarshalBinary reads lost, count and the records, reusing the
// capacity of r.Records.
func (r *EventsGetReply) UnmarshalBinary(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("EVENTS_GET reply: %w", ErrShort)
	}
	n := int(b[1])
	if n > MaxRecords {
		return fmt.Errorf("EVENTS_GET reply: %d records: %w", n, ErrTooLong)
	}
	if len(b) < 2+n*RecordLen {
		return fmt.Errorf("EVENTS_GET reply: %d records in %d bytes: %w", n, len(b), ErrShort)
	}
	recs := r.Records[:0]
	for i := range n {
		var rec Record
		if err := rec.UnmarshalBinary(b[2+i*RecordLen:]); err != nil {
			return fmt.Errorf("EVENTS_GET reply record %d: %w", i, err)
		}
		recs = append(recs, rec)
	}
	r.Lost, r.Records = b[0], recs
	return nil
}

// NewRequest returns a new zero request payload for type t (a request
// type, or TypeEvent, whose payload is a *Record), ready for
// UnmarshalBinary.
func NewRequest(t Type) (Message, error) {
	switch t {
	case TypePing:
		return &PingRequest{}, nil
	case TypeVersion:
		return &VersionRequest{}, nil
	case TypeStatus:
		return &StatusRequest{}, nil
	case TypeScene:
		return &SceneRequest{}, nil
	case TypeEnd:
		return &EndRequest{}, nil
	case TypeScreenOff:
		return &ScreenOffRequest{}, nil
	case TypeColour:
		return &ColourRequest{}, nil
	case TypeBacklight:
		return &BacklightRequest{}, nil
	case TypeLEDs:
		return &LEDsRequest{}, nil
	case TypeHolo:
		return &HoloRequest{}, nil
	case TypeEventsSet:
		return &EventsSetRequest{}, nil
	case TypeEventsGet:
		return &EventsGetRequest{}, nil
	case TypeEvent:
		return &Record{}, nil
	case TypeRestart:
		return &RestartRequest{}, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrUnknownType, t)
}

// NewReplyBody returns a new zero reply body for the reply to t; t may
// be the request type or the reply type.
func NewReplyBody(t Type) (Message, error) {
	switch t.Request() {
	case TypePing:
		return &PingReply{}, nil
	case TypeVersion:
		return &VersionReply{}, nil
	case TypeStatus:
		return &StatusReply{}, nil
	case TypeEventsSet:
		return &EventsSetReply{}, nil
	case TypeEventsGet:
		return &EventsGetReply{}, nil
	case TypeScene, TypeEnd, TypeScreenOff, TypeColour, TypeBacklight, TypeLEDs, TypeHolo, TypeRestart:
		return &Empty{}, nil
	}
	return nil, fmt.Errorf("%w: no reply to %v", ErrUnknownType, t)
}

// ParseRequest decodes the payload of a request frame (or an EVENT
// frame) into its typed form.
func ParseRequest(f Frame) (Message, error) {
	req, err := NewRequest(f.Type)
	if err != nil {
		return nil, err
	}
	if err := req.UnmarshalBinary(f.Payload); err != nil {
		return nil, err
	}
	return req, nil
}

// ParseReply decodes the payload of a reply frame into its header and
// typed body. When the status is not ok the body is nil.
func ParseReply(f Frame) (Header, Message, error) {
	if !f.Type.IsReply() {
		return Header{}, nil, fmt.Errorf("%w: %v is not a reply", ErrUnknownType, f.Type)
	}
	h, rest, err := SplitReply(f.Payload)
	if err != nil || h.Status != StatusOK {
		return h, nil, err
	}
	body, err := NewReplyBody(f.Type)
	if err != nil {
		return h, nil, err
	}
	if err := body.UnmarshalBinary(rest); err != nil {
		return h, nil, err
	}
	return h, body, nil
}

// AppendRequest appends the wire form of a frame to addr carrying req,
// with req's type.
func AppendRequest(dst []byte, addr Address, seq uint8, req Request) ([]byte, error) {
	var buf [MaxPayload]byte
	p, err := req.AppendBinary(buf[:0])
	if err != nil {
		return dst, err
	}
	return AppendEncode(dst, Frame{Addr: addr, Seq: seq, Type: req.Type(), Payload: p})
}

// AppendReply appends the wire form of the reply to a request of type
// req: from the board's own address, echoing seq, with the header and,
// when the status is ok, body (nil when the reply has none).
func AppendReply(dst []byte, addr Address, seq uint8, req Type, h Header, body encoding.BinaryAppender) ([]byte, error) {
	var buf [MaxPayload]byte
	p, err := AppendReplyPayload(buf[:0], h, body)
	if err != nil {
		return dst, err
	}
	return AppendEncode(dst, Frame{Addr: addr, Seq: seq, Type: req.Reply(), Payload: p})
}
