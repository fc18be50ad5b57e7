// Package artnet is the codec of the Art-Net 4 packets a DMX receiver
// needs: ArtDmx (a universe's slots), ArtPoll (a desk looking for nodes),
// ArtPollReply (the node's answer, naming it) and ArtSync (apply what was
// received). Decoding never allocates beyond the packet structs.
//
// Every packet starts with the same ten bytes, then the protocol version;
// the opcode is little-endian, every other 16-bit field big-endian unless
// the table says otherwise:
//
//	offset size field
//	0      8    "Art-Net\0"
//	8      2    opcode, low byte first: 0x2000 poll, 0x2100 poll reply,
//	            0x5000 dmx, 0x5200 sync
//	10     2    protocol version 14 (hi, lo; absent in a poll reply)
//
//	ArtDmx                           ArtPoll                 ArtSync
//	12 1 sequence (0: not used)      12 1 flags              12 1 aux1
//	13 1 physical input port         13 1 diagnostics prio   13 1 aux2
//	14 1 SubUni: sub-net, universe   (later versions add     (14 bytes)
//	15 1 Net (7 bits)                 target port-address
//	16 2 length 2-512, even           fields; ignored)
//	18 n slots
//
// The 15-bit Port-Address of an ArtDmx is Net<<8 | SubUni.
//
// ArtPollReply (239 bytes; no protocol version: the address follows the
// opcode):
//
//	10 4 IPv4 address      14 2 port 0x1936 (low byte first)
//	16 2 firmware version  18 1 NetSwitch     19 1 SubSwitch
//	20 2 OEM code          22 1 UBEA version  23 1 Status1
//	24 2 ESTA code (lo,hi) 26 18 short name   44 64 long name
//	108 64 node report     172 2 number of ports
//	174 4 port types       178 4 good input   182 4 good output
//	186 4 SwIn             190 4 SwOut        194 1 sACN priority
//	195 1 SwMacro          196 1 SwRemote     197 3 spare
//	200 1 style            201 6 MAC          207 4 bind IP
//	211 1 bind index       212 1 Status2      213 4 good output B
//	217 1 Status3          218..238 zero
package artnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Port is Art-Net's UDP port.
const Port = 6454

// Opcodes.
const (
	OpPoll      = 0x2000
	OpPollReply = 0x2100
	OpDmx       = 0x5000
	OpSync      = 0x5200
)

// Version is the protocol version sent and the least one taken.
const Version = 14

// Sizes.
const (
	MaxSlots     = 512
	PollReplyLen = 239
	dmxHeader    = 18
	ShortNameLen = 18
	LongNameLen  = 64
	// MaxPortAddress is the largest 15-bit Port-Address.
	MaxPortAddress = 0x7fff
)

var id = [8]byte{'A', 'r', 't', '-', 'N', 'e', 't', 0}

// Errors of Decode.
var (
	// ErrMalformed: not an Art-Net packet, or one whose fields disagree.
	ErrMalformed = errors.New("artnet: malformed packet")
	// ErrIgnored: a well-formed Art-Net packet the receiver does not act
	// on (another opcode, or a poll reply from another node).
	ErrIgnored = errors.New("artnet: packet ignored")
)

// Dmx is an ArtDmx packet; Slots aliases the decoded buffer.
type Dmx struct {
	Sequence    uint8
	Physical    uint8
	PortAddress uint16
	Slots       []byte
}

// Poll is an ArtPoll packet.
type Poll struct {
	Flags        uint8
	DiagPriority uint8
}

// Sync is an ArtSync packet.
type Sync struct{}

// Packet is a decoded packet: Op says which field is set (Sync has no
// fields).
type Packet struct {
	Op   uint16
	Dmx  *Dmx
	Poll *Poll
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

// Decode decodes one UDP payload; d and p are the storage of the result.
func Decode(b []byte, d *Dmx, p *Poll) (Packet, error) {
	op, ok := OpCode(b)
	if !ok {
		return Packet{}, bad("no Art-Net header")
	}
	if op == OpPollReply {
		return Packet{}, fmt.Errorf("%w: poll reply", ErrIgnored)
	}
	if len(b) < 12 {
		return Packet{}, bad("no protocol version")
	}
	if v := binary.BigEndian.Uint16(b[10:]); v < Version {
		return Packet{}, bad("protocol version %d (at least %d)", v, Version)
	}
	switch op {
	case OpDmx:
		if len(b) < dmxHeader {
			return Packet{}, bad("ArtDmx of %d bytes", len(b))
		}
		n := int(binary.BigEndian.Uint16(b[16:]))
		if n < 2 || n > MaxSlots || n%2 != 0 {
			return Packet{}, bad("ArtDmx length %d (2-512, even)", n)
		}
		if len(b) < dmxHeader+n {
			return Packet{}, bad("ArtDmx length %d, %d bytes follow", n, len(b)-dmxHeader)
		}
		if b[15]&0x80 != 0 {
			return Packet{}, bad("Net 0x%x (7 bits)", b[15])
		}
		*d = Dmx{Sequence: b[12], Physical: b[13], PortAddress: uint16(b[15])<<8 | uint16(b[14]), Slots: b[dmxHeader : dmxHeader+n]}
		return Packet{Op: op, Dmx: d}, nil
	case OpPoll:
		if len(b) < 14 {
			return Packet{}, bad("ArtPoll of %d bytes", len(b))
		}
		*p = Poll{Flags: b[12], DiagPriority: b[13]}
		return Packet{Op: op, Poll: p}, nil
	case OpSync:
		if len(b) < 14 {
			return Packet{}, bad("ArtSync of %d bytes", len(b))
		}
		return Packet{Op: op}, nil
	}
	return Packet{}, fmt.Errorf("%w: opcode 0x%04x", ErrIgnored, op)
}

// OpCode reads the opcode of an Art-Net packet (the ID "Art-Net" and a
// NUL, then the opcode low byte first); ok is false when b does not start
// with both. The protocol version that follows (high byte first) is the
// receiver's to check: receivers differ on older senders.
func OpCode(b []byte) (op uint16, ok bool) {
	if len(b) < 10 || [8]byte(b[:8]) != id {
		return 0, false
	}
	return binary.LittleEndian.Uint16(b[8:10]), true
}

// AppendHeader appends the 12 bytes that start every Art-Net packet of
// opcode op but ArtPollReply: the ID, op (low byte first) and Version
// (high byte first).
func AppendHeader(dst []byte, op uint16) []byte {
	return binary.BigEndian.AppendUint16(appendID(dst, op), Version)
}

// appendID appends the ID and op: an ArtPollReply has no version there.
func appendID(dst []byte, op uint16) []byte {
	return binary.LittleEndian.AppendUint16(append(dst, id[:]...), op)
}

// AppendDmx appends d encoded; an odd slot count is padded with a zero
// slot, as the standard asks.
func AppendDmx(dst []byte, d Dmx) ([]byte, error) {
	if len(d.Slots) == 0 || len(d.Slots) > MaxSlots || d.PortAddress > MaxPortAddress {
		return dst, fmt.Errorf("artnet: %d slots (1-%d), port-address %d (0-%d)", len(d.Slots), MaxSlots, d.PortAddress, MaxPortAddress)
	}
	n := len(d.Slots) + len(d.Slots)%2
	dst = AppendHeader(dst, OpDmx)
	dst = append(dst, d.Sequence, d.Physical, byte(d.PortAddress), byte(d.PortAddress>>8))
	dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	dst = append(dst, d.Slots...)
	if n != len(d.Slots) {
		dst = append(dst, 0)
	}
	return dst, nil
}

// AppendPoll appends p encoded (the 14-byte form every version takes).
func AppendPoll(dst []byte, p Poll) []byte {
	return append(AppendHeader(dst, OpPoll), p.Flags, p.DiagPriority)
}

// AppendSync appends an ArtSync.
func AppendSync(dst []byte) []byte { return append(AppendHeader(dst, OpSync), 0, 0) }

// PollReply is what the gateway says of itself when polled.
type PollReply struct {
	IP        netip.Addr // IPv4
	Firmware  uint16
	ShortName string // at most 17 bytes kept
	LongName  string // at most 63 bytes kept
	Report    string // node report, at most 63 bytes kept
	// Ports are the Port-Addresses the node outputs (at most 4 in one
	// reply; they must share Net and sub-net, whose bits come from the
	// first).
	Ports []uint16
	MAC   [6]byte
}

// Style of a node that is not a desk (StNode).
const styleNode = 0x00

// AppendPollReply appends r encoded.
func AppendPollReply(dst []byte, r PollReply) []byte {
	start := len(dst)
	dst = appendID(dst, OpPollReply)
	dst = append(dst, make([]byte, PollReplyLen-len(dst)+start)...)
	b := dst[start:]
	if r.IP.Is4() {
		ip := r.IP.As4()
		copy(b[10:14], ip[:])
	}
	binary.LittleEndian.PutUint16(b[14:], Port)
	binary.BigEndian.PutUint16(b[16:], r.Firmware)
	ports := r.Ports
	if len(ports) > 4 {
		ports = ports[:4]
	}
	if len(ports) > 0 {
		b[18] = byte(ports[0]>>8) & 0x7f // Net
		b[19] = byte(ports[0]>>4) & 0x0f // sub-net
	}
	b[23] = 0xd0 // Status1: indicators normal, port-address set by network
	copy(b[26:26+ShortNameLen-1], r.ShortName)
	copy(b[44:44+LongNameLen-1], r.LongName)
	copy(b[108:108+63], r.Report)
	binary.BigEndian.PutUint16(b[172:], uint16(len(ports)))
	for i, pa := range ports {
		b[174+i] = 0x80 // can output DMX512
		b[182+i] = 0x80 // data is being output
		b[190+i] = byte(pa) & 0x0f
	}
	b[200] = styleNode
	copy(b[201:207], r.MAC[:])
	b[212] = 0x08 // Status2: 15-bit Port-Address
	return dst
}

// DecodePollReply decodes an ArtPollReply (what a desk reads of a node;
// the gateway uses it in tests and tools).
func DecodePollReply(b []byte) (PollReply, error) {
	if op, ok := OpCode(b); len(b) < PollReplyLen || !ok || op != OpPollReply {
		return PollReply{}, bad("not an ArtPollReply")
	}
	cstr := func(f []byte) string {
		if i := bytes.IndexByte(f, 0); i >= 0 {
			f = f[:i]
		}
		return string(f)
	}
	r := PollReply{IP: netip.AddrFrom4([4]byte(b[10:14])), Firmware: binary.BigEndian.Uint16(b[16:]),
		ShortName: cstr(b[26:44]), LongName: cstr(b[44:108]), Report: cstr(b[108:172])}
	n := int(binary.BigEndian.Uint16(b[172:]))
	if n > 4 {
		return PollReply{}, bad("%d ports in one reply (at most 4)", n)
	}
	for i := range n {
		r.Ports = append(r.Ports, uint16(b[18]&0x7f)<<8|uint16(b[19]&0x0f)<<4|uint16(b[190+i]&0x0f))
	}
	copy(r.MAC[:], b[201:207])
	return r, nil
}
