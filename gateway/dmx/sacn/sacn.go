// Package sacn is the codec of streaming ACN (ANSI E1.31), the way
// lighting desks send DMX512 universes over UDP: data packets and
// synchronisation packets. It decodes what a receiver needs and encodes
// the same packets (for tests and tools); it never allocates to decode.
//
// A packet nests three layers, each a PDU that starts with 12 bits of
// length (the PDU's bytes from that point to the packet's end) under
// the flags 0x7, and a vector that says what follows:
//
//	offset  size  field                          data packet        sync packet
//	root layer
//	0       2     preamble size                  0x0010             0x0010
//	2       2     postamble size                 0x0000             0x0000
//	4       12    ACN packet identifier          "ASC-E1.17\0\0\0"  same
//	16      2     flags 0x7 | length             len-16             len-16
//	18      4     root vector                    0x00000004 (data)  0x00000008 (extended)
//	22      16    CID: the source's UUID
//	framing layer
//	38      2     flags 0x7 | length             len-38             len-38
//	40      4     framing vector                 0x00000002 (data)  0x00000001 (sync)
//	        data packet                          sync packet
//	44      64    source name, UTF-8, NUL padded 44 1 sequence number
//	108     1     priority 0-200 (default 100)   45 2 synchronisation address
//	109     2     synchronisation address        47 2 reserved (total 49 bytes)
//	111     1     sequence number
//	112     1     options: 0x80 preview data, 0x40 stream terminated,
//	              0x20 force synchronisation
//	113     2     universe 1-63999
//	DMP layer
//	115     2     flags 0x7 | length             len-115
//	117     1     DMP vector                     0x02 (set property)
//	118     1     address and data type          0xa1
//	119     2     first property address         0x0000
//	121     2     address increment              0x0001
//	123     2     property value count           1 + slots (1-513)
//	125     1     DMX start code (0: dimmer data)
//	126     n     slots 1..n (n 0-512)
//
// Every multi-byte field is big-endian. Universe discovery packets
// (extended vector 0x00000002) are recognised and ignored (Decode returns
// ErrIgnored): the gateway is a receiver and needs no list of a source's
// universes, since it joins the groups of the universes it is patched to.
package sacn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Port is the UDP port of E1.31.
const Port = 5568

// Limits and defaults.
const (
	MinUniverse     = 1
	MaxUniverse     = 63999
	MaxPriority     = 200
	DefaultPriority = 100
	MaxSlots        = 512
	// SourceNameLen is the width of the source name field.
	SourceNameLen = 64
)

// Options bits of a data packet.
const (
	OptPreview    = 0x80
	OptTerminated = 0x40
	OptForceSync  = 0x20
)

// Vectors.
const (
	vectorRootData     = 0x00000004
	vectorRootExtended = 0x00000008
	vectorFramingData  = 0x00000002
	vectorExtSync      = 0x00000001
	vectorExtDiscovery = 0x00000002
	vectorDMPSet       = 0x02
	dmpAddressType     = 0xa1
)

// Sizes of the packets.
const (
	dataHeader = 126 // bytes before the first slot
	SyncLen    = 49
	MaxDataLen = dataHeader + MaxSlots
)

var acnID = [12]byte{'A', 'S', 'C', '-', 'E', '1', '.', '1', '7', 0, 0, 0}

// Errors of Decode; each wraps ErrMalformed except ErrIgnored.
var (
	// ErrMalformed: the bytes are not an E1.31 packet this codec takes
	// (a wrong identifier, a length that disagrees, a field out of range).
	ErrMalformed = errors.New("sacn: malformed packet")
	// ErrIgnored: a well-formed E1.31 packet of a kind the receiver does
	// not act on (universe discovery).
	ErrIgnored = errors.New("sacn: packet ignored")
)

// Data is an E1.31 data packet. Slots aliases the decoded buffer.
type Data struct {
	CID        [16]byte
	SourceName string
	Priority   uint8
	SyncAddr   uint16
	Sequence   uint8
	Options    uint8
	Universe   uint16
	StartCode  uint8
	Slots      []byte
}

// Preview reports the preview-data option (for visualisers, not output).
func (d *Data) Preview() bool { return d.Options&OptPreview != 0 }

// Terminated reports the stream-terminated option: the source has left
// this universe.
func (d *Data) Terminated() bool { return d.Options&OptTerminated != 0 }

// Sync is an E1.31 synchronisation packet.
type Sync struct {
	CID      [16]byte
	Sequence uint8
	SyncAddr uint16
}

// Packet is a decoded packet: exactly one of Data and Sync is set.
type Packet struct {
	Data *Data
	Sync *Sync
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

// checkPDU checks a flags-and-length field at off against the packet's
// length n.
func checkPDU(b []byte, off int, layer string) error {
	v := binary.BigEndian.Uint16(b[off:])
	if v>>12 != 0x7 {
		return bad("%s flags 0x%x (want 0x7)", layer, v>>12)
	}
	if int(v&0x0fff) != len(b)-off {
		return bad("%s length %d, the packet holds %d", layer, v&0x0fff, len(b)-off)
	}
	return nil
}

// Decode decodes one UDP payload. d's storage is reused: the result's
// Data or Sync points into it, and Data.Slots into b.
func Decode(b []byte, d *Data, s *Sync) (Packet, error) {
	if len(b) < 38 {
		return Packet{}, bad("%d bytes (a root layer is 38)", len(b))
	}
	if binary.BigEndian.Uint16(b[0:]) != 0x0010 || binary.BigEndian.Uint16(b[2:]) != 0 {
		return Packet{}, bad("preamble or postamble size")
	}
	if !bytes.Equal(b[4:16], acnID[:]) {
		return Packet{}, bad("not an ACN packet identifier")
	}
	if err := checkPDU(b, 16, "root"); err != nil {
		return Packet{}, err
	}
	if len(b) < 44 {
		return Packet{}, bad("%d bytes: no framing layer", len(b))
	}
	if err := checkPDU(b, 38, "framing"); err != nil {
		return Packet{}, err
	}
	var cid [16]byte
	copy(cid[:], b[22:38])
	root, framing := binary.BigEndian.Uint32(b[18:]), binary.BigEndian.Uint32(b[40:])
	switch {
	case root == vectorRootExtended && framing == vectorExtSync:
		if len(b) != SyncLen {
			return Packet{}, bad("sync packet of %d bytes (want %d)", len(b), SyncLen)
		}
		*s = Sync{CID: cid, Sequence: b[44], SyncAddr: binary.BigEndian.Uint16(b[45:])}
		return Packet{Sync: s}, nil
	case root == vectorRootExtended && framing == vectorExtDiscovery:
		return Packet{}, fmt.Errorf("%w: universe discovery", ErrIgnored)
	case root == vectorRootData && framing == vectorFramingData:
	default:
		return Packet{}, bad("vectors root 0x%08x framing 0x%08x", root, framing)
	}
	if len(b) < dataHeader {
		return Packet{}, bad("data packet of %d bytes (at least %d)", len(b), dataHeader)
	}
	if err := checkPDU(b, 115, "DMP"); err != nil {
		return Packet{}, err
	}
	if b[117] != vectorDMPSet || b[118] != dmpAddressType ||
		binary.BigEndian.Uint16(b[119:]) != 0 || binary.BigEndian.Uint16(b[121:]) != 1 {
		return Packet{}, bad("DMP layer header")
	}
	count := int(binary.BigEndian.Uint16(b[123:]))
	if count < 1 || count > MaxSlots+1 || count != len(b)-125 {
		return Packet{}, bad("property value count %d for %d bytes", count, len(b)-125)
	}
	prio := b[108]
	if prio > MaxPriority {
		return Packet{}, bad("priority %d (0-%d)", prio, MaxPriority)
	}
	uni := binary.BigEndian.Uint16(b[113:])
	if uni < MinUniverse || uni > MaxUniverse {
		return Packet{}, bad("universe %d (%d-%d)", uni, MinUniverse, MaxUniverse)
	}
	name := b[44:108]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	*d = Data{CID: cid, SourceName: string(name), Priority: prio,
		SyncAddr: binary.BigEndian.Uint16(b[109:]), Sequence: b[111], Options: b[112],
		Universe: uni, StartCode: b[125], Slots: b[126:]}
	return Packet{Data: d}, nil
}

func putPDU(b []byte, off int) {
	binary.BigEndian.PutUint16(b[off:], 0x7000|uint16(len(b)-off))
}

func putRoot(b []byte, vector uint32, cid [16]byte) {
	binary.BigEndian.PutUint16(b[0:], 0x0010)
	copy(b[4:16], acnID[:])
	putPDU(b, 16)
	binary.BigEndian.PutUint32(b[18:], vector)
	copy(b[22:38], cid[:])
	putPDU(b, 38)
}

// AppendData appends d encoded to dst. Names longer than the field are
// cut; more than MaxSlots slots are an error.
func AppendData(dst []byte, d Data) ([]byte, error) {
	if len(d.Slots) > MaxSlots {
		return dst, fmt.Errorf("sacn: %d slots (at most %d)", len(d.Slots), MaxSlots)
	}
	n := dataHeader + len(d.Slots)
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	b := dst[start:]
	putRoot(b, vectorRootData, d.CID)
	binary.BigEndian.PutUint32(b[40:], vectorFramingData)
	copy(b[44:108], d.SourceName)
	b[108] = d.Priority
	binary.BigEndian.PutUint16(b[109:], d.SyncAddr)
	b[111] = d.Sequence
	b[112] = d.Options
	binary.BigEndian.PutUint16(b[113:], d.Universe)
	putPDU(b, 115)
	b[117] = vectorDMPSet
	b[118] = dmpAddressType
	binary.BigEndian.PutUint16(b[121:], 1)
	binary.BigEndian.PutUint16(b[123:], uint16(1+len(d.Slots)))
	b[125] = d.StartCode
	copy(b[126:], d.Slots)
	return dst, nil
}

// AppendSync appends s encoded to dst.
func AppendSync(dst []byte, s Sync) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, SyncLen)...)
	b := dst[start:]
	putRoot(b, vectorRootExtended, s.CID)
	binary.BigEndian.PutUint32(b[40:], vectorExtSync)
	b[44] = s.Sequence
	binary.BigEndian.PutUint16(b[45:], s.SyncAddr)
	return dst
}

// MulticastAddr is the IPv4 multicast group of a universe (or of a
// synchronisation address): 239.255.hi.lo.
func MulticastAddr(universe uint16) netip.Addr {
	return netip.AddrFrom4([4]byte{239, 255, byte(universe >> 8), byte(universe)})
}

// SequenceOK reports whether a packet numbered next follows one numbered
// last: E1.31 discards a packet whose number is behind the last by 1 to
// 20 (modulo 256), a late duplicate; a bigger jump is a restarted source.
func SequenceOK(last, next uint8) bool {
	d := int8(next - last)
	return d > 0 || d <= -20
}
