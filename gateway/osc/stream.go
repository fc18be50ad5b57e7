package osc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Framing is how OSC packets are delimited on a stream (TCP).
type Framing int

// Framings.
const (
	// FramingSize is OSC 1.0's: each packet preceded by its length as a
	// big-endian int32.
	FramingSize Framing = iota
	// FramingSLIP is OSC 1.1's: each packet SLIP-encoded (RFC 1055)
	// between END bytes (double END: one before, one after).
	FramingSLIP
)

func (f Framing) String() string {
	if f == FramingSLIP {
		return "slip"
	}
	return "size"
}

// SLIP bytes.
const (
	slipEnd    = 0xC0
	slipEsc    = 0xDB
	slipEscEnd = 0xDC
	slipEscEsc = 0xDD
)

// MaxPacket is the largest packet the stream reader takes (and the UDP
// server's buffer).
const MaxPacket = 65536

// ErrTooLarge: a framed packet larger than MaxPacket.
var ErrTooLarge = errors.New("osc: packet too large")

// StreamReader reads framed packets from a stream. The framing is told
// apart by the stream's first byte: SLIP's END (0xC0) for OSC 1.1, else
// the size prefix of OSC 1.0 (whose first byte is 0 for any packet under
// 16 MiB).
type StreamReader struct {
	r       *bufio.Reader
	framing Framing
	known   bool
}

// NewStreamReader reads packets from r.
func NewStreamReader(r io.Reader) *StreamReader {
	return &StreamReader{r: bufio.NewReaderSize(r, 4096)}
}

// Framing is the stream's framing (known after the first Next).
func (s *StreamReader) Framing() Framing { return s.framing }

// Next returns the next packet's bytes (not decoded). io.EOF at a clean
// end; ErrTooLarge or ErrMalformed (wrapped) for a stream that cannot go
// on.
func (s *StreamReader) Next() ([]byte, error) {
	if !s.known {
		c, err := s.r.Peek(1)
		if err != nil {
			return nil, err
		}
		s.known = true
		if c[0] == slipEnd {
			s.framing = FramingSLIP
		}
	}
	if s.framing == FramingSLIP {
		return s.nextSLIP()
	}
	var hdr [4]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxPacket {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(s.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

func (s *StreamReader) nextSLIP() ([]byte, error) {
	var b []byte
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch c {
		case slipEnd:
			if len(b) > 0 {
				return b, nil
			}
			continue // the END opening a packet, or one between packets
		case slipEsc:
			e, err := s.r.ReadByte()
			if err != nil {
				return nil, io.ErrUnexpectedEOF
			}
			switch e {
			case slipEscEnd:
				c = slipEnd
			case slipEscEsc:
				c = slipEsc
			default:
				return nil, fmt.Errorf("%w: SLIP escape followed by %#x", ErrMalformed, e)
			}
		}
		if len(b) >= MaxPacket {
			return nil, fmt.Errorf("%w: SLIP packet over %d bytes", ErrTooLarge, MaxPacket)
		}
		b = append(b, c)
	}
}

// AppendFrame appends pkt (encoded) framed by f to b.
func AppendFrame(b []byte, f Framing, pkt []byte) []byte {
	if f == FramingSize {
		b = binary.BigEndian.AppendUint32(b, uint32(len(pkt)))
		return append(b, pkt...)
	}
	b = append(b, slipEnd)
	for _, c := range pkt {
		switch c {
		case slipEnd:
			b = append(b, slipEsc, slipEscEnd)
		case slipEsc:
			b = append(b, slipEsc, slipEscEsc)
		default:
			b = append(b, c)
		}
	}
	return append(b, slipEnd)
}
