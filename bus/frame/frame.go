package frame

import (
	"errors"
	"fmt"

	"github.com/holofleet/holofleet/bus/cobs"
	"github.com/holofleet/holofleet/bus/crc16"
)

// Sizes of a frame.
const (
	// MaxPayload is the largest payload a frame carries.
	MaxPayload = 48
	// HeaderLen is the size of addr, seq and type.
	HeaderLen = 3
	// CRCLen is the size of the trailing checksum.
	CRCLen = 2
	// MinLen is the size of a frame with an empty payload.
	MinLen = HeaderLen + CRCLen
	// MaxLen is the size of a frame with the largest payload.
	MaxLen = MinLen + MaxPayload
	// MaxWireLen is the largest wire form: two delimiters around the
	// COBS encoding of a MaxLen frame.
	MaxWireLen = 2 + MaxLen + MaxLen/254 + 1
	// Delimiter is the byte that opens and closes a frame on the wire.
	Delimiter = 0x00
)

// Errors of this package. Functions return them as they are or wrapped
// with context; compare with errors.Is.
var (
	// ErrShort means the input ends before the fields it must hold.
	ErrShort = errors.New("frame: too short")
	// ErrTooLong means a payload over 48 bytes, a frame over 53, or a
	// field longer than its limit (a version string over 32 bytes, more
	// than 5 event records).
	ErrTooLong = errors.New("frame: too long")
	// ErrBadCRC means the checksum does not match the bytes before it.
	ErrBadCRC = errors.New("frame: bad checksum")
	// ErrEncoding means the bytes between delimiters are not valid COBS.
	ErrEncoding = errors.New("frame: bad COBS encoding")
	// ErrAddress means the address 255, or a group number outside 1-31.
	ErrAddress = errors.New("frame: invalid address")
	// ErrRange means a field holds a value the protocol does not allow.
	ErrRange = errors.New("frame: value out of range")
	// ErrUnknownType means a message type this package has no payload for.
	ErrUnknownType = errors.New("frame: unknown message type")
	// ErrUnknownName means a name that maps to no enumeration value.
	ErrUnknownName = errors.New("frame: unknown name")
)

// Frame is one native frame without its checksum. Type is the value on
// the wire: a reply carries the request's type with the top bit set.
type Frame struct {
	Addr    Address
	Seq     uint8
	Type    Type
	Payload []byte
}

// AppendEncode appends the wire form of f, 0x00 COBS(frame) 0x00, to dst.
// It allocates only when dst lacks room for MaxWireLen more bytes.
func AppendEncode(dst []byte, f Frame) ([]byte, error) {
	if len(f.Payload) > MaxPayload {
		return dst, ErrTooLong
	}
	if f.Addr == Invalid {
		return dst, ErrAddress
	}
	var raw [MaxLen]byte
	raw[0], raw[1], raw[2] = byte(f.Addr), f.Seq, byte(f.Type)
	n := HeaderLen + copy(raw[HeaderLen:], f.Payload)
	c := crc16.Checksum(raw[:n])
	raw[n], raw[n+1] = byte(c), byte(c>>8)
	dst = append(dst, Delimiter)
	dst = cobs.Append(dst, raw[:n+CRCLen])
	return append(dst, Delimiter), nil
}

// Parse checks a frame that has already been COBS-decoded: its length
// (5 to 53 bytes), its checksum and its address. The payload of the
// result aliases raw.
func Parse(raw []byte) (Frame, error) {
	switch {
	case len(raw) < MinLen:
		return Frame{}, ErrShort
	case len(raw) > MaxLen:
		return Frame{}, ErrTooLong
	case !crc16.Valid(raw):
		return Frame{}, ErrBadCRC
	case Address(raw[0]) == Invalid:
		return Frame{}, ErrAddress
	}
	end := len(raw) - CRCLen
	return Frame{
		Addr:    Address(raw[0]),
		Seq:     raw[1],
		Type:    Type(raw[2]),
		Payload: raw[HeaderLen:end:end],
	}, nil
}

// Decode unstuffs one frame from wire into dst's storage and parses it.
// wire is the bytes between two delimiters; delimiters at either end are
// skipped. It returns the frame, whose payload aliases the returned
// buffer, and that buffer (dst[:0] extended) so the caller can reuse it.
// With cap(dst) >= MaxLen it does not allocate.
func Decode(dst []byte, wire []byte) (Frame, []byte, error) {
	for len(wire) > 0 && wire[0] == Delimiter {
		wire = wire[1:]
	}
	for len(wire) > 0 && wire[len(wire)-1] == Delimiter {
		wire = wire[:len(wire)-1]
	}
	dst = dst[:0]
	if len(wire) > MaxWireLen-2 {
		return Frame{}, dst, ErrTooLong
	}
	raw, err := cobs.AppendDecode(dst, wire)
	if err != nil {
		return Frame{}, dst, ErrEncoding
	}
	f, err := Parse(raw)
	return f, raw, err
}

// Address is a frame's addr byte.
//
//	0        every board (broadcast)
//	1-223    one board
//	224-254  group 1-31 (223 + group number)
//	255      invalid
type Address uint8

// Address values and bounds.
const (
	Broadcast Address = 0
	MinBoard  Address = 1
	MaxBoard  Address = 223
	Invalid   Address = 255
	// MaxGroup is the highest group number.
	MaxGroup = 31
	// groupBase + n is the address of group n.
	groupBase = 223
)

// GroupAddress returns the address of group n (1-31), or Invalid.
func GroupAddress(n int) Address {
	if n < 1 || n > MaxGroup {
		return Invalid
	}
	return Address(groupBase + n)
}

// IsBoard reports whether a names one board (1-223).
func (a Address) IsBoard() bool { return a >= MinBoard && a <= MaxBoard }

// IsGroup reports whether a names a group (224-254).
func (a Address) IsGroup() bool { return a > MaxBoard && a < Invalid }

// IsBroadcast reports whether a is 0, every board.
func (a Address) IsBroadcast() bool { return a == Broadcast }

// Valid reports whether a is any address but 255.
func (a Address) Valid() bool { return a != Invalid }

// Group returns the group number (1-31) of a group address, otherwise 0.
func (a Address) Group() int {
	if !a.IsGroup() {
		return 0
	}
	return int(a) - groupBase
}

// Reaches reports whether a frame sent to a is meant for the board with
// address board that belongs to the given groups.
func (a Address) Reaches(board Address, groups []uint8) bool {
	switch {
	case a.IsBroadcast():
		return true
	case a.IsBoard():
		return a == board
	case a.IsGroup():
		g := uint8(a.Group())
		for _, x := range groups {
			if x == g {
				return true
			}
		}
	}
	return false
}

// String formats a as the JSON-lines link does: "@5", "@g3", "@*";
// 255 is "@invalid".
func (a Address) String() string {
	switch {
	case a.IsBroadcast():
		return "@*"
	case a.IsBoard():
		return fmt.Sprintf("@%d", uint8(a))
	case a.IsGroup():
		return fmt.Sprintf("@g%d", a.Group())
	}
	return "@invalid"
}

// String formats f for logs: address, seq, type and payload in hex,
// for example "@5 #3 STATUS [ ]".
func (f Frame) String() string {
	return fmt.Sprintf("%v #%d %v [% X]", f.Addr, f.Seq, f.Type, f.Payload)
}
