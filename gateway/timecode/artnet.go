package timecode

import (
	"errors"
	"fmt"

	"github.com/holofleet/holofleet/gateway/dmx/artnet"
)

// ArtTimeCode, Art-Net 4's timecode packet, as UDP carries it to port
// 6454 (little-endian opcode, big-endian protocol version):
//
//	offset size field
//	0      8    ID: "Art-Net" and a NUL
//	8      2    OpCode 0x9700, low byte first (00 97)
//	10     2    ProtVer, high byte first (00 0e: 14)
//	12     1    Filler1 (0)
//	13     1    StreamId (0: the master timecode; a receiver may follow one)
//	14     1    Frames 0-29 (below the rate's fps)
//	15     1    Seconds 0-59
//	16     1    Minutes 0-59
//	17     1    Hours 0-23
//	18     1    Type: 0 film (24), 1 EBU (25), 2 DF (29.97), 3 SMPTE (30)
//
// 19 bytes. Longer packets are read (later revisions may append fields);
// a protocol version below 14 is still read (older senders), as Art-Net
// asks of receivers.
const (
	// ArtTimeCodeLen is the packet's length.
	ArtTimeCodeLen = 19
	// OpTimeCode is ArtTimeCode's opcode.
	OpTimeCode = 0x9700
	// ProtVer is the Art-Net protocol version written.
	ProtVer = artnet.Version
)

// Errors of the codec.
var (
	// ErrNotArtNet: the packet does not start with "Art-Net\0", or is too
	// short to hold an opcode.
	ErrNotArtNet = errors.New("timecode: not an Art-Net packet")
	// ErrNotTimeCode: an Art-Net packet with another opcode (ArtDmx,
	// ArtPoll...): a listener hands those elsewhere.
	ErrNotTimeCode = errors.New("timecode: not ArtTimeCode")
	// ErrShort: an ArtTimeCode packet shorter than ArtTimeCodeLen.
	ErrShort = errors.New("timecode: ArtTimeCode too short")
)

// ArtTimeCode is one ArtTimeCode packet.
type ArtTimeCode struct {
	// StreamID tells timecode streams apart (0: the master).
	StreamID uint8
	Timecode Timecode
}

// Decode reads an ArtTimeCode packet. It is the piece an Art-Net
// listener calls for opcode 0x9700: ErrNotArtNet and ErrNotTimeCode say
// the packet is someone else's; ErrShort, ErrBadRate and ErrBadTimecode
// that it is a broken timecode packet. It never panics and keeps no
// reference to b.
func Decode(b []byte) (ArtTimeCode, error) {
	op, ok := artnet.OpCode(b)
	if !ok {
		return ArtTimeCode{}, ErrNotArtNet
	}
	if op != OpTimeCode {
		return ArtTimeCode{}, fmt.Errorf("%w: opcode %#04x", ErrNotTimeCode, op)
	}
	if len(b) < ArtTimeCodeLen {
		return ArtTimeCode{}, fmt.Errorf("%w: %d bytes (%d)", ErrShort, len(b), ArtTimeCodeLen)
	}
	p := ArtTimeCode{StreamID: b[13], Timecode: Timecode{Frames: b[14], Seconds: b[15], Minutes: b[16], Hours: b[17], Rate: Rate(b[18])}}
	if err := p.Timecode.Check(); err != nil {
		return ArtTimeCode{}, err
	}
	return p, nil
}

// AppendBinary appends the packet's 19 bytes to b; a timecode that does
// not Check is an error.
func (p ArtTimeCode) AppendBinary(b []byte) ([]byte, error) {
	t := p.Timecode
	if err := t.Check(); err != nil {
		return b, err
	}
	return append(artnet.AppendHeader(b, OpTimeCode), 0, p.StreamID, t.Frames, t.Seconds, t.Minutes, t.Hours, byte(t.Rate)), nil
}
