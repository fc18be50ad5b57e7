// Package osc is the gateway's Open Sound Control front door: a codec of
// OSC 1.0/1.1 packets (messages and bundles), OSC 1.0 address pattern
// matching, the two TCP framings (OSC 1.1's SLIP with double END, OSC
// 1.0's int32 size prefix), and a server taking show commands over UDP
// and TCP on one port (server.go). docs/osc.md describes the address
// space.
package osc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Errors of the codec.
var (
	// ErrMalformed: the bytes are not an OSC packet (bad padding, a
	// truncated argument, an unknown type tag, a bundle element that
	// overruns it...). The error's text says what.
	ErrMalformed = errors.New("osc: malformed packet")
	// ErrUnsupported: a value the encoder cannot write as an OSC argument.
	ErrUnsupported = errors.New("osc: unsupported argument")
)

// MaxDepth bounds the nesting of bundles the decoder accepts.
const MaxDepth = 8

// Impulse is the value of the I (infinitum, "bang" in OSC 1.1) argument.
type Impulse struct{}

// Timetag is an OSC time tag: NTP time, seconds since 1900 in the high 32
// bits and the fraction of a second in the low 32. Immediately (1) means
// "now".
type Timetag uint64

// Immediately is the time tag meaning "at once".
const Immediately Timetag = 1

// ntpEpochOffset is seconds from 1900-01-01 to 1970-01-01.
const ntpEpochOffset = 2208988800

// TimetagOf is the time tag of t.
func TimetagOf(t time.Time) Timetag {
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := (uint64(t.Nanosecond()) << 32) / 1e9
	return Timetag(secs<<32 | frac)
}

// Time is the time the tag stands for (meaningless for Immediately).
func (tt Timetag) Time() time.Time {
	secs := int64(uint64(tt)>>32) - ntpEpochOffset
	nanos := (uint64(tt) & 0xffffffff) * 1e9 >> 32
	return time.Unix(secs, int64(nanos))
}

// Packet is a *Message or a *Bundle.
type Packet interface {
	// AppendBinary appends the packet's OSC encoding to b.
	AppendBinary(b []byte) ([]byte, error)
}

// Message is an OSC message: an address (or address pattern) and its
// arguments. Argument Go types by type tag: i int32, f float32, s string,
// b []byte, h int64, d float64, t Timetag, T true, F false, N nil,
// I Impulse.
type Message struct {
	Address string
	Args    []any
}

// Bundle is an OSC bundle: a time tag and its elements.
type Bundle struct {
	Time     Timetag
	Elements []Packet
}

var bundleTag = []byte("#bundle\x00")

// Decode reads one OSC packet (the whole of b).
func Decode(b []byte) (Packet, error) { return decode(b, 0) }

func decode(b []byte, depth int) (Packet, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%w: %d bytes, not a multiple of 4", ErrMalformed, len(b))
	}
	switch b[0] {
	case '#':
		return decodeBundle(b, depth)
	case '/':
		return decodeMessage(b)
	}
	return nil, fmt.Errorf("%w: neither a message (/...) nor a bundle (#bundle)", ErrMalformed)
}

func decodeBundle(b []byte, depth int) (*Bundle, error) {
	if depth >= MaxDepth {
		return nil, fmt.Errorf("%w: bundles nested deeper than %d", ErrMalformed, MaxDepth)
	}
	if len(b) < 16 || !bytes.Equal(b[:8], bundleTag) {
		return nil, fmt.Errorf("%w: bad bundle header", ErrMalformed)
	}
	bu := &Bundle{Time: Timetag(binary.BigEndian.Uint64(b[8:16]))}
	rest := b[16:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: truncated bundle element size", ErrMalformed)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) || n == 0 {
			return nil, fmt.Errorf("%w: bundle element of %d bytes in %d", ErrMalformed, n, len(rest))
		}
		p, err := decode(rest[:n], depth+1)
		if err != nil {
			return nil, err
		}
		bu.Elements = append(bu.Elements, p)
		rest = rest[n:]
	}
	return bu, nil
}

// readString reads an OSC string (NUL-terminated, padded with NULs to a
// multiple of 4) and returns it and the rest.
func readString(b []byte) (string, []byte, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, fmt.Errorf("%w: unterminated string", ErrMalformed)
	}
	end := (i + 4) &^ 3
	if end > len(b) {
		return "", nil, fmt.Errorf("%w: string padding overruns the packet", ErrMalformed)
	}
	for _, c := range b[i:end] {
		if c != 0 {
			return "", nil, fmt.Errorf("%w: string padding is not NUL", ErrMalformed)
		}
	}
	return string(b[:i]), b[end:], nil
}

func decodeMessage(b []byte) (*Message, error) {
	addr, rest, err := readString(b)
	if err != nil {
		return nil, err
	}
	m := &Message{Address: addr}
	if len(rest) == 0 {
		return m, nil // an OSC 1.0 message without a type tag string: no arguments
	}
	tags, rest, err := readString(rest)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(tags, ",") {
		return nil, fmt.Errorf("%w: type tag string does not start with ','", ErrMalformed)
	}
	need := func(n int) error {
		if len(rest) < n {
			return fmt.Errorf("%w: truncated argument", ErrMalformed)
		}
		return nil
	}
	for _, tag := range []byte(tags[1:]) {
		switch tag {
		case 'i':
			if err := need(4); err != nil {
				return nil, err
			}
			m.Args = append(m.Args, int32(binary.BigEndian.Uint32(rest)))
			rest = rest[4:]
		case 'f':
			if err := need(4); err != nil {
				return nil, err
			}
			m.Args = append(m.Args, math.Float32frombits(binary.BigEndian.Uint32(rest)))
			rest = rest[4:]
		case 'h', 'd', 't':
			if err := need(8); err != nil {
				return nil, err
			}
			v := binary.BigEndian.Uint64(rest)
			switch tag {
			case 'h':
				m.Args = append(m.Args, int64(v))
			case 'd':
				m.Args = append(m.Args, math.Float64frombits(v))
			default:
				m.Args = append(m.Args, Timetag(v))
			}
			rest = rest[8:]
		case 's', 'S':
			var s string
			if s, rest, err = readString(rest); err != nil {
				return nil, err
			}
			m.Args = append(m.Args, s)
		case 'b':
			if err := need(4); err != nil {
				return nil, err
			}
			n := binary.BigEndian.Uint32(rest)
			rest = rest[4:]
			padded := (uint64(n) + 3) &^ 3
			if padded > uint64(len(rest)) {
				return nil, fmt.Errorf("%w: blob of %d bytes overruns the packet", ErrMalformed, n)
			}
			for _, c := range rest[n:padded] {
				if c != 0 {
					return nil, fmt.Errorf("%w: blob padding is not NUL", ErrMalformed)
				}
			}
			m.Args = append(m.Args, bytes.Clone(rest[:n]))
			rest = rest[padded:]
		case 'T':
			m.Args = append(m.Args, true)
		case 'F':
			m.Args = append(m.Args, false)
		case 'N':
			m.Args = append(m.Args, nil)
		case 'I':
			m.Args = append(m.Args, Impulse{})
		default:
			return nil, fmt.Errorf("%w: unknown type tag %q", ErrMalformed, tag)
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the arguments", ErrMalformed, len(rest))
	}
	return m, nil
}

func appendString(b []byte, s string) []byte {
	b = append(b, s...)
	b = append(b, 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// AppendBinary appends the message's encoding to b. Strings must hold no
// NUL; arguments of other Go types are ErrUnsupported.
func (m *Message) AppendBinary(b []byte) ([]byte, error) {
	if !strings.HasPrefix(m.Address, "/") || strings.IndexByte(m.Address, 0) >= 0 {
		return b, fmt.Errorf("%w: address %q", ErrUnsupported, m.Address)
	}
	tags := make([]byte, 1, len(m.Args)+1)
	tags[0] = ','
	for _, a := range m.Args {
		switch v := a.(type) {
		case int32:
			tags = append(tags, 'i')
		case float32:
			tags = append(tags, 'f')
		case int64:
			tags = append(tags, 'h')
		case float64:
			tags = append(tags, 'd')
		case Timetag:
			tags = append(tags, 't')
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				return b, fmt.Errorf("%w: string holding NUL", ErrUnsupported)
			}
			tags = append(tags, 's')
		case []byte:
			tags = append(tags, 'b')
		case bool:
			if v {
				tags = append(tags, 'T')
			} else {
				tags = append(tags, 'F')
			}
		case nil:
			tags = append(tags, 'N')
		case Impulse:
			tags = append(tags, 'I')
		default:
			return b, fmt.Errorf("%w: %T", ErrUnsupported, a)
		}
	}
	b = appendString(b, m.Address)
	b = appendString(b, string(tags))
	for _, a := range m.Args {
		switch v := a.(type) {
		case int32:
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		case float32:
			b = binary.BigEndian.AppendUint32(b, math.Float32bits(v))
		case int64:
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		case float64:
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
		case Timetag:
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		case string:
			b = appendString(b, v)
		case []byte:
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
			for len(b)%4 != 0 {
				b = append(b, 0)
			}
		}
	}
	return b, nil
}

// AppendBinary appends the bundle's encoding to b.
func (bu *Bundle) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, bundleTag...)
	b = binary.BigEndian.AppendUint64(b, uint64(bu.Time))
	for _, e := range bu.Elements {
		at := len(b)
		b = append(b, 0, 0, 0, 0)
		var err error
		if b, err = e.AppendBinary(b); err != nil {
			return b[:at], err
		}
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	}
	return b, nil
}

// Encode is p's encoding.
func Encode(p Packet) ([]byte, error) { return p.AppendBinary(nil) }
