package frame

import (
	"encoding/binary"
	"fmt"
)

// RecordLen is the size of an event record.
const RecordLen = 8

// Kind is an event record's kind byte.
type Kind uint8

// Event kinds. Kind 0 is what the I2C EVENT register holds when no event
// is pending.
const (
	KindNone         Kind = 0
	KindClipEnded    Kind = 1
	KindSceneEnded   Kind = 2
	KindTouch        Kind = 3
	KindClipStarted  Kind = 4
	KindSceneStarted Kind = 5
	KindReady        Kind = 15
)

var kindNames = [...]string{
	KindClipEnded:    "clip_ended",
	KindSceneEnded:   "scene_ended",
	KindTouch:        "touch",
	KindClipStarted:  "clip_started",
	KindSceneStarted: "scene_started",
	KindReady:        "ready",
}

// Name returns the JSON event name ("clip_ended", ..., "ready"), or ""
// for a kind without one.
func (k Kind) Name() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return ""
}

// String returns Name, or "Kind(n)" for a kind without a name.
func (k Kind) String() string {
	if n := k.Name(); n != "" {
		return n
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind maps a JSON event name to its kind.
func ParseKind(name string) (Kind, error) {
	for k, n := range kindNames {
		if n != "" && n == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("%w: event kind %q", ErrUnknownName, name)
}

// Bit returns the EVENTS_SET bit that selects k, or 0 when k cannot be
// selected (ready, unknown kinds).
func (k Kind) Bit() KindMask {
	if k >= KindClipEnded && k <= KindSceneStarted {
		return 1 << (k - 1)
	}
	return 0
}

// KindMask is the EVENTS_SET kinds byte: bit k-1 selects kind k.
//
//	bit 0 clip_ended, bit 1 scene_ended, bit 2 touch,
//	bit 3 clip_started, bit 4 scene_started
//
// Bits 5-7 are not defined in protocol 1; they are kept as sent and
// select nothing.
type KindMask uint8

// Kind masks.
const (
	MaskClipEnded    KindMask = 1 << 0
	MaskSceneEnded   KindMask = 1 << 1
	MaskTouch        KindMask = 1 << 2
	MaskClipStarted  KindMask = 1 << 3
	MaskSceneStarted KindMask = 1 << 4
	// MaskAll selects every kind of protocol 1.
	MaskAll KindMask = 0x1F
)

// Has reports whether m selects k.
func (m KindMask) Has(k Kind) bool { b := k.Bit(); return b != 0 && m&b != 0 }

// Kinds returns the selected kinds in bit order.
func (m KindMask) Kinds() []Kind {
	var ks []Kind
	for k := KindClipEnded; k <= KindSceneStarted; k++ {
		if m.Has(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// Names returns the JSON names of the selected kinds in bit order, never
// nil.
func (m KindMask) Names() []string {
	names := []string{}
	for _, k := range m.Kinds() {
		names = append(names, k.Name())
	}
	return names
}

// MaskOf returns the mask selecting the named kinds. A name that is not a
// selectable kind (including "ready") is an ErrUnknownName error.
func MaskOf(names []string) (KindMask, error) {
	var m KindMask
	for _, n := range names {
		k, err := ParseKind(n)
		if err != nil {
			return 0, err
		}
		if k.Bit() == 0 {
			return 0, fmt.Errorf("%w: event kind %q cannot be selected", ErrUnknownName, n)
		}
		m |= k.Bit()
	}
	return m, nil
}

// Record is one 8-byte event record: an EVENT frame's payload, one entry
// of an EVENTS_GET reply, and the I2C EVENT register.
//
//	byte  0     kind
//	bytes 1-2   seq (0 for ready)
//	bytes 3-7   by kind:
//	  clip_ended     finished u8
//	  scene_ended    slot u8 (0 none), then u8, by u8
//	  touch          action u8, x u8, y u8 (0-239)
//	  clip_started   loop u8, plays u8 (0 forever), frames u16, fps u8
//	  scene_started  slot u8, then u8, until_clip_ends u8, duration_s u16
//	  ready          protocol u8, address u8
//
// Only the fields of Kind are encoded; the others are ignored and read
// back as zero. Booleans read as true for any non-zero byte. A kind this
// package does not know keeps bytes 3-7 in Raw, and encodes them back.
type Record struct {
	Kind Kind
	Seq  uint16

	Finished bool // clip_ended: played to its end

	Slot          uint8   // scene_ended, scene_started: slot, 0 none
	Then          Then    // scene_ended, scene_started
	By            EndedBy // scene_ended
	UntilClipEnds bool    // scene_started
	DurationS     uint16  // scene_started: whole seconds rounded up, 0 none

	Action TouchAction // touch
	X, Y   uint8       // touch: 0-239

	Loop   bool   // clip_started
	Plays  uint8  // clip_started: times through, 0 forever
	Frames uint16 // clip_started
	FPS    uint8  // clip_started: rounded

	Protocol uint8   // ready: link protocol version
	Address  Address // ready: the board's address

	Raw [5]byte // unknown kinds: bytes 3-7 as received
}

// MaxTouch is the largest touch coordinate.
const MaxTouch = 239

// Type returns TypeEvent, so a Record can be sent with AppendRequest.
func (Record) Type() Type { return TypeEvent }

// AppendBinary appends the 8 bytes of r to b.
func (r Record) AppendBinary(b []byte) ([]byte, error) {
	var v [RecordLen]byte
	v[0] = byte(r.Kind)
	binary.LittleEndian.PutUint16(v[1:], r.Seq)
	d := v[3:]
	switch r.Kind {
	case KindClipEnded:
		d[0] = boolByte(r.Finished)
	case KindSceneEnded:
		d[0], d[1], d[2] = r.Slot, byte(r.Then), byte(r.By)
	case KindTouch:
		if r.X > MaxTouch || r.Y > MaxTouch {
			return b, fmt.Errorf("record: touch at %d,%d: %w", r.X, r.Y, ErrRange)
		}
		d[0], d[1], d[2] = byte(r.Action), r.X, r.Y
	case KindClipStarted:
		d[0], d[1] = boolByte(r.Loop), r.Plays
		binary.LittleEndian.PutUint16(d[2:], r.Frames)
		d[4] = r.FPS
	case KindSceneStarted:
		d[0], d[1], d[2] = r.Slot, byte(r.Then), boolByte(r.UntilClipEnds)
		binary.LittleEndian.PutUint16(d[3:], r.DurationS)
	case KindReady:
		d[0], d[1] = r.Protocol, byte(r.Address)
	default:
		copy(d, r.Raw[:])
	}
	return append(b, v[:]...), nil
}

// UnmarshalBinary reads a record from the first 8 bytes of b; later bytes
// are ignored.
func (r *Record) UnmarshalBinary(b []byte) error {
	if len(b) < RecordLen {
		return fmt.Errorf("record: %d bytes: %w", len(b), ErrShort)
	}
	v := Record{Kind: Kind(b[0]), Seq: binary.LittleEndian.Uint16(b[1:])}
	d := b[3:RecordLen]
	switch v.Kind {
	case KindClipEnded:
		v.Finished = d[0] != 0
	case KindSceneEnded:
		v.Slot, v.Then, v.By = d[0], Then(d[1]), EndedBy(d[2])
	case KindTouch:
		if d[1] > MaxTouch || d[2] > MaxTouch {
			return fmt.Errorf("record: touch at %d,%d: %w", d[1], d[2], ErrRange)
		}
		v.Action, v.X, v.Y = TouchAction(d[0]), d[1], d[2]
	case KindClipStarted:
		v.Loop, v.Plays = d[0] != 0, d[1]
		v.Frames = binary.LittleEndian.Uint16(d[2:])
		v.FPS = d[4]
	case KindSceneStarted:
		v.Slot, v.Then, v.UntilClipEnds = d[0], Then(d[1]), d[2] != 0
		v.DurationS = binary.LittleEndian.Uint16(d[3:])
	case KindReady:
		v.Protocol, v.Address = d[0], Address(d[1])
	default:
		copy(v.Raw[:], d)
	}
	*r = v
	return nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
