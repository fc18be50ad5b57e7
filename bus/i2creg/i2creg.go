// Package i2creg encodes the register map a board exposes as an I2C
// target, and provides an in-memory I2C bus that routes transactions to
// simulated targets.
//
// The board answers at its 7-bit address (DefaultAddress, 0x42, unless
// changed). A write transaction carries the register number and then the
// register's contents; a read transaction writes the register number and
// reads after a repeated start. There is no COBS and no addr byte; the
// checksums are those of the native frames (CRC-16/CCITT-FALSE, sent
// little-endian).
//
//	reg   name     access            contents
//	0x00  STATUS   read, 14 bytes    protocol u8, status block (12), pending u8
//	0x10  COMMAND  write             seq u8, type u8, payload (0-48), crc16
//	0x11  RESULT   read, <= 56 bytes seq u8, type|0x80, status u8, pending u8,
//	                                 reply body, crc16
//	0x20  EVENT    read, 8 bytes     oldest event not yet given (kind 0: none)
//	0x30  VERSION  read, 32 bytes    firmware version, ASCII, zero padded
//
// A command runs once its write ends; the host reads RESULT until the
// status is no longer frame.StatusWorking (0xFE). Every native request but
// EVENTS_GET may be a command. A COMMAND written to the general call
// address 0x00 reaches every board that enabled general call, and leaves
// no result to read.
//
// RESULT has no length field: a read returns the result followed by
// padding. This package pads with 0xFF (what an I2C controller sees once a
// target stops driving the bus), and Result.UnmarshalBinary finds the end
// of the result from its type and status, or else as the shortest prefix
// with a valid checksum followed only by padding.
package i2creg

import (
	"encoding"
	"errors"
	"fmt"

	"github.com/holofleet/holofleet/bus/crc16"
	"github.com/holofleet/holofleet/bus/frame"
)

// Register is a register number, the first byte of every transaction.
type Register uint8

// Registers.
const (
	RegStatus  Register = 0x00
	RegCommand Register = 0x10
	RegResult  Register = 0x11
	RegEvent   Register = 0x20
	RegVersion Register = 0x30
)

// String returns the register's name, or its number in hex.
func (r Register) String() string {
	switch r {
	case RegStatus:
		return "STATUS"
	case RegCommand:
		return "COMMAND"
	case RegResult:
		return "RESULT"
	case RegEvent:
		return "EVENT"
	case RegVersion:
		return "VERSION"
	}
	return fmt.Sprintf("Register(0x%02X)", uint8(r))
}

// Addresses and sizes.
const (
	// DefaultAddress is a board's 7-bit address until it is changed.
	DefaultAddress = 0x42
	// GeneralCall is the address every target with general call on
	// listens to.
	GeneralCall = 0x00
	// MinAddress and MaxAddress bound the 7-bit addresses a target may
	// take; the others are reserved by the I2C specification.
	MinAddress = 0x08
	MaxAddress = 0x77

	// StatusLen is the size of the STATUS register.
	StatusLen = 1 + frame.StatusBlockLen + 1
	// MinCommandLen is a command with an empty payload.
	MinCommandLen = 2 + frame.CRCLen
	// MaxCommandLen is a command with the largest payload.
	MaxCommandLen = MinCommandLen + frame.MaxPayload
	// MinResultLen is a result with an empty body.
	MinResultLen = 4 + frame.CRCLen
	// MaxResultLen is the most a host needs to read from RESULT.
	MaxResultLen = 56
	// MaxResultBody is the largest reply body in a result.
	MaxResultBody = MaxResultLen - MinResultLen
	// EventLen is the size of the EVENT register: one frame.Record.
	EventLen = frame.RecordLen
	// VersionLen is the size of the VERSION register.
	VersionLen = 32
	// Pad is the byte a read returns past the end of a register's data.
	Pad = 0xFF
)

// ValidAddress reports whether a is a 7-bit address a target may use.
func ValidAddress(a uint8) bool { return a >= MinAddress && a <= MaxAddress }

// Errors of this package; frame's ErrShort, ErrTooLong, ErrBadCRC and
// ErrRange are used as they are. Compare with errors.Is.
var (
	// ErrEventsGet means an EVENTS_GET command, which I2C does not carry:
	// events are read from the EVENT register.
	ErrEventsGet = errors.New("i2creg: EVENTS_GET is not a command on I2C")
	// ErrNotReply means a result whose type lacks the reply bit.
	ErrNotReply = errors.New("i2creg: result type is not a reply")
	// ErrAddress means a 7-bit address outside 0x08-0x77, or the general
	// call address where it cannot be used.
	ErrAddress = errors.New("i2creg: invalid address")
	// ErrAddressInUse means a target is already attached at the address.
	ErrAddressInUse = errors.New("i2creg: address in use")
	// ErrNoAck means no target acknowledged the address.
	ErrNoAck = errors.New("i2creg: no target acknowledged")
	// ErrGeneralCallRead means a read from the general call address,
	// which has no result.
	ErrGeneralCallRead = errors.New("i2creg: general call cannot be read")
	// ErrReadLength means a read of no bytes or of more than MaxRead.
	ErrReadLength = errors.New("i2creg: read length out of range")
)

// Command is the COMMAND register's contents: a native request without
// the addr byte and without COBS.
//
//	byte 0     seq
//	byte 1     type (a request type; not EVENTS_GET)
//	bytes 2..  payload (0-48 bytes)
//	last 2     crc16 over the bytes before it, little-endian
type Command struct {
	Seq     uint8
	Type    frame.Type
	Payload []byte
}

// AppendBinary appends the command and its checksum to b.
func (c Command) AppendBinary(b []byte) ([]byte, error) {
	if c.Type == frame.TypeEventsGet {
		return b, ErrEventsGet
	}
	if len(c.Payload) > frame.MaxPayload {
		return b, fmt.Errorf("i2creg: command payload of %d bytes: %w", len(c.Payload), frame.ErrTooLong)
	}
	start := len(b)
	b = append(b, c.Seq, byte(c.Type))
	b = append(b, c.Payload...)
	return appendCRC(b, start), nil
}

// UnmarshalBinary reads a whole command write. Payload aliases b. An
// unknown type is accepted (the board answers it with
// frame.StatusUnknownType); EVENTS_GET is refused.
func (c *Command) UnmarshalBinary(b []byte) error {
	switch {
	case len(b) < MinCommandLen:
		return fmt.Errorf("i2creg: command of %d bytes: %w", len(b), frame.ErrShort)
	case len(b) > MaxCommandLen:
		return fmt.Errorf("i2creg: command of %d bytes: %w", len(b), frame.ErrTooLong)
	case !crc16.Valid(b):
		return fmt.Errorf("i2creg: command: %w", frame.ErrBadCRC)
	case frame.Type(b[1]) == frame.TypeEventsGet:
		return ErrEventsGet
	}
	end := len(b) - frame.CRCLen
	*c = Command{Seq: b[0], Type: frame.Type(b[1]), Payload: b[2:end:end]}
	return nil
}

// AppendCommand appends the COMMAND contents carrying req to dst.
func AppendCommand(dst []byte, seq uint8, req frame.Request) ([]byte, error) {
	var buf [frame.MaxPayload]byte
	p, err := req.AppendBinary(buf[:0])
	if err != nil {
		return dst, err
	}
	return Command{Seq: seq, Type: req.Type(), Payload: p}.AppendBinary(dst)
}

// Frame returns the command as a native frame addressed to addr, for a
// board that serves both transports with one handler.
func (c Command) Frame(addr frame.Address) frame.Frame {
	return frame.Frame{Addr: addr, Seq: c.Seq, Type: c.Type, Payload: c.Payload}
}

// Result is the RESULT register's contents. Type is the reply type as on
// the wire (the command's type with the reply bit). Payload is the reply
// body after status and pending, empty unless Status is ok.
//
//	byte 0     seq (the command's)
//	byte 1     type | 0x80
//	byte 2     status (frame.Status; 0xFE still working)
//	byte 3     pending
//	bytes 4..  reply body (0-50 bytes)
//	last 2     crc16 over the bytes before it, little-endian
type Result struct {
	Seq     uint8
	Type    frame.Type
	Status  frame.Status
	Pending uint8
	Payload []byte
}

// Header returns the result's status and pending as a frame reply header.
func (r Result) Header() frame.Header { return frame.Header{Status: r.Status, Pending: r.Pending} }

// AppendBinary appends the result and its checksum to b, without padding.
func (r Result) AppendBinary(b []byte) ([]byte, error) {
	if !r.Type.IsReply() {
		return b, ErrNotReply
	}
	if len(r.Payload) > MaxResultBody {
		return b, fmt.Errorf("i2creg: result body of %d bytes: %w", len(r.Payload), frame.ErrTooLong)
	}
	start := len(b)
	b = append(b, r.Seq, byte(r.Type), byte(r.Status), r.Pending)
	b = append(b, r.Payload...)
	return appendCRC(b, start), nil
}

// AppendResult appends the RESULT contents answering a command of type
// req with seq: header h and, when h.Status is ok, body (nil for none).
func AppendResult(dst []byte, seq uint8, req frame.Type, h frame.Header, body encoding.BinaryAppender) ([]byte, error) {
	var buf [frame.MaxPayload]byte
	p, err := frame.AppendReplyPayload(buf[:0], h, body)
	if err != nil {
		return dst, err
	}
	return Result{Seq: seq, Type: req.Reply(), Status: h.Status, Pending: h.Pending, Payload: p[frame.ReplyHeaderLen:]}.AppendBinary(dst)
}

// UnmarshalBinary reads a RESULT read of any length from MinResultLen
// up, padding included. Payload aliases b. The end of the result is
// where its type and status say (no body unless ok; PING 5 bytes, STATUS
// 12, EVENTS_SET 2, the others none); for VERSION, unknown types, or when
// that place holds no valid checksum, it is the first place where a valid
// checksum is followed only by Pad bytes.
func (r *Result) UnmarshalBinary(b []byte) error {
	if len(b) < MinResultLen {
		return fmt.Errorf("i2creg: result of %d bytes: %w", len(b), frame.ErrShort)
	}
	if !frame.Type(b[1]).IsReply() {
		return fmt.Errorf("%w: type 0x%02X", ErrNotReply, b[1])
	}
	n := 0
	if body := bodyLen(frame.Type(b[1]), frame.Status(b[2])); body >= 0 {
		if m := MinResultLen + body; m <= len(b) && crc16.Valid(b[:m]) {
			n = m
		}
	}
	for m := MinResultLen; n == 0 && m <= min(len(b), MaxResultLen); m++ {
		if crc16.Valid(b[:m]) && padded(b[m:]) {
			n = m
		}
	}
	if n == 0 {
		return fmt.Errorf("i2creg: result: %w", frame.ErrBadCRC)
	}
	end := n - frame.CRCLen
	*r = Result{Seq: b[0], Type: frame.Type(b[1]), Status: frame.Status(b[2]), Pending: b[3], Payload: b[4:end:end]}
	return nil
}

// bodyLen returns the reply body length a result of type t and status s
// has in protocol 1, or -1 when it varies or is not known.
func bodyLen(t frame.Type, s frame.Status) int {
	if s != frame.StatusOK {
		return 0
	}
	switch t.Request() {
	case frame.TypePing:
		return 5
	case frame.TypeStatus:
		return frame.StatusBlockLen
	case frame.TypeEventsSet:
		return 2
	case frame.TypeScene, frame.TypeEnd, frame.TypeScreenOff, frame.TypeColour,
		frame.TypeBacklight, frame.TypeLEDs, frame.TypeHolo, frame.TypeRestart:
		return 0
	}
	return -1
}

// appendCRC appends the checksum of b[start:] to b.
func appendCRC(b []byte, start int) []byte {
	c := crc16.Checksum(b[start:])
	return append(b, byte(c), byte(c>>8))
}

func padded(b []byte) bool {
	for _, v := range b {
		if v != Pad {
			return false
		}
	}
	return true
}

// StatusReg is the STATUS register's contents.
//
//	byte 0      protocol (1)
//	bytes 1-12  frame.StatusBlock
//	byte 13     pending
type StatusReg struct {
	Protocol uint8
	Block    frame.StatusBlock
	Pending  uint8
}

// AppendBinary appends the 14 bytes.
func (s StatusReg) AppendBinary(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, s.Protocol)
	b, err := s.Block.AppendBinary(b)
	if err != nil {
		return b[:start], err
	}
	return append(b, s.Pending), nil
}

// UnmarshalBinary reads the first 14 bytes of b.
func (s *StatusReg) UnmarshalBinary(b []byte) error {
	if len(b) < StatusLen {
		return fmt.Errorf("i2creg: status of %d bytes: %w", len(b), frame.ErrShort)
	}
	var blk frame.StatusBlock
	if err := blk.UnmarshalBinary(b[1 : 1+frame.StatusBlockLen]); err != nil {
		return err
	}
	*s = StatusReg{Protocol: b[0], Block: blk, Pending: b[StatusLen-1]}
	return nil
}

// Version is the VERSION register's contents: printable ASCII, at most
// 32 bytes, padded with zeros to 32.
type Version string

// AppendBinary appends the 32 bytes.
func (v Version) AppendBinary(b []byte) ([]byte, error) {
	if err := frame.CheckVersion(string(v)); err != nil {
		return b, err
	}
	b = append(b, v...)
	for range VersionLen - len(v) {
		b = append(b, 0)
	}
	return b, nil
}

// UnmarshalBinary reads the first 32 bytes of b: the text up to the first
// zero byte. The bytes after it are not looked at.
func (v *Version) UnmarshalBinary(b []byte) error {
	if len(b) < VersionLen {
		return fmt.Errorf("i2creg: version of %d bytes: %w", len(b), frame.ErrShort)
	}
	b = b[:VersionLen]
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	if err := frame.CheckVersion(string(b)); err != nil {
		return err
	}
	*v = Version(b)
	return nil
}
