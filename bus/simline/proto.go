package simline

import (
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"
)

// The hub protocol: what a Remote and ServeHub exchange over a stream
// socket. Every message is
//
//	offset 0  length  u32 LE  bytes that follow (type + body), 1..MaxMessage
//	offset 4  type    u8
//	offset 5  body    per type, little-endian:
//
//	HELLO   0x01  node -> hub  version u8 (=1), flags u8, name (0..MaxName bytes, UTF-8)
//	WELCOME 0x02  hub -> node  version u8, baud u32
//	SEND    0x10  node -> hub  bytes to transmit (1..MaxData)
//	SENT    0x11  hub -> node  count u32, time i64: line clock (Unix ns) when the last byte left
//	RECV    0x20  hub -> node  time i64: line clock (Unix ns) when forwarded, bytes (1..MaxData)
//	ERROR   0x7F  hub -> node  reason, UTF-8 text (0..MaxName*4 bytes)
//
// HELLO flags: bit 0 echo, bit 1 silent; other bits must be zero.
//
// The conversation: the node sends HELLO first and the hub answers WELCOME
// (or ERROR and closes). Then the node sends SEND and waits for its SENT,
// which the hub sends once the bytes have taken their wire time, so a
// remote Write blocks as long as a local one; meanwhile the hub sends RECV
// whenever the line delivers bytes to the node. Either side closing the
// socket detaches the node.
const (
	ProtocolVersion = 1

	MsgHello   = 0x01
	MsgWelcome = 0x02
	MsgSend    = 0x10
	MsgSent    = 0x11
	MsgRecv    = 0x20
	MsgError   = 0x7F

	FlagEcho   = 1 << 0
	FlagSilent = 1 << 1

	// MaxData is the most bytes one SEND or RECV carries; longer writes
	// go as several SENDs.
	MaxData = 64 << 10
	// MaxName is the longest node name.
	MaxName = 64
	// MaxMessage is the largest length field accepted.
	MaxMessage = 1 + 8 + MaxData

	headerLen = 4
	maxError  = MaxName * 4
)

// Msg is one hub protocol message; which fields matter depends on Type.
type Msg struct {
	Type    byte
	Version byte   // HELLO, WELCOME
	Flags   byte   // HELLO
	Name    string // HELLO
	Baud    uint32 // WELCOME
	Count   uint32 // SENT
	Time    int64  // SENT, RECV: Unix nanoseconds of the line's clock
	Data    []byte // SEND, RECV
	Text    string // ERROR
}

// AppendMsg appends the encoding of m to dst. It does not validate m;
// DecodeMsg of the result fails if m breaks a limit.
func AppendMsg(dst []byte, m Msg) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0, m.Type)
	switch m.Type {
	case MsgHello:
		dst = append(dst, m.Version, m.Flags)
		dst = append(dst, m.Name...)
	case MsgWelcome:
		dst = append(dst, m.Version)
		dst = binary.LittleEndian.AppendUint32(dst, m.Baud)
	case MsgSend:
		dst = append(dst, m.Data...)
	case MsgSent:
		dst = binary.LittleEndian.AppendUint32(dst, m.Count)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Time))
	case MsgRecv:
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Time))
		dst = append(dst, m.Data...)
	case MsgError:
		dst = append(dst, m.Text...)
	}
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-headerLen))
	return dst
}

// DecodeMsg decodes the message at the start of b and reports how many
// bytes it took. It returns ErrShort (and 0) when b holds only part of a
// message, and an error matching ErrProtocol for anything malformed. Data
// aliases b.
func DecodeMsg(b []byte) (Msg, int, error) {
	if len(b) < headerLen {
		return Msg{}, 0, ErrShort
	}
	size := binary.LittleEndian.Uint32(b)
	if size < 1 || size > MaxMessage {
		return Msg{}, 0, fmt.Errorf("%w: length %d", ErrProtocol, size)
	}
	total := headerLen + int(size)
	if len(b) < total {
		return Msg{}, 0, ErrShort
	}
	m, err := decodeBody(b[headerLen], b[headerLen+1:total])
	if err != nil {
		return Msg{}, 0, err
	}
	return m, total, nil
}

func decodeBody(typ byte, body []byte) (Msg, error) {
	m := Msg{Type: typ}
	bad := func(why string) (Msg, error) {
		return Msg{}, fmt.Errorf("%w: type 0x%02x: %s", ErrProtocol, typ, why)
	}
	switch typ {
	case MsgHello:
		if len(body) < 2 {
			return bad("short")
		}
		m.Version, m.Flags = body[0], body[1]
		if m.Flags&^(FlagEcho|FlagSilent) != 0 {
			return bad("unknown flags")
		}
		name := body[2:]
		if len(name) > MaxName || !utf8.Valid(name) {
			return bad("bad name")
		}
		m.Name = string(name)
	case MsgWelcome:
		if len(body) != 5 {
			return bad("size")
		}
		m.Version = body[0]
		m.Baud = binary.LittleEndian.Uint32(body[1:])
	case MsgSend:
		if len(body) < 1 || len(body) > MaxData {
			return bad("size")
		}
		m.Data = body
	case MsgSent:
		if len(body) != 12 {
			return bad("size")
		}
		m.Count = binary.LittleEndian.Uint32(body)
		m.Time = int64(binary.LittleEndian.Uint64(body[4:]))
	case MsgRecv:
		if len(body) < 9 || len(body) > 8+MaxData {
			return bad("size")
		}
		m.Time = int64(binary.LittleEndian.Uint64(body))
		m.Data = body[8:]
	case MsgError:
		if len(body) > maxError || !utf8.Valid(body) {
			return bad("bad text")
		}
		m.Text = string(body)
	default:
		return bad("unknown type")
	}
	return m, nil
}

// msgReader reads whole messages from a stream, reusing its buffer.
type msgReader struct {
	r   io.Reader
	buf []byte
}

// next reads one message. Data aliases the reader's buffer until the next
// call. A clean end of stream between messages is io.EOF.
func (mr *msgReader) next() (Msg, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(mr.r, hdr[:]); err != nil {
		return Msg{}, err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size < 1 || size > MaxMessage {
		return Msg{}, fmt.Errorf("%w: length %d", ErrProtocol, size)
	}
	if cap(mr.buf) < int(size) {
		mr.buf = make([]byte, size)
	}
	body := mr.buf[:size]
	if _, err := io.ReadFull(mr.r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Msg{}, err
	}
	return decodeBody(body[0], body[1:])
}
