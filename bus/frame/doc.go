// Package frame encodes and decodes the native binary messages of the host
// link: the framing used on UART and RS485, the message payloads, the
// 12-byte status block and the 8-byte event record. The I2C registers in
// package i2creg reuse the payloads, the status block and the record.
//
// # Frames
//
// A frame is three header bytes, a payload and a checksum:
//
//	offset  size   field
//	0       1      addr     Address: 1-223 a board, 224-254 a group, 0 every board
//	1       1      seq      picked by the host, echoed in the reply
//	2       1      type     Type; a reply uses the request's type + 0x80
//	3       0-48   payload  message fields, multi-byte values little-endian
//	3+n     2      crc16    CRC-16/CCITT-FALSE of bytes 0..3+n-1, little-endian
//
// so a frame is 5 to 53 bytes long. On the wire it is COBS-stuffed and
// wrapped in zero bytes: 0x00 COBS(frame) 0x00, at most 56 bytes.
//
// [AppendEncode] produces that wire form; [Parse] checks an already
// unstuffed frame; [Decode] does both steps into a buffer the caller
// reuses. None of them allocate when the buffers are large enough, and the
// payload of a parsed frame aliases the buffer it came from.
//
// # Messages
//
// Each request type has its own struct ([PingRequest], [SceneRequest],
// [LEDsRequest], ...) that implements [Request]. A reply payload starts
// with a [Header] (status, pending) followed by a body; the bodies are
// [PingReply], [VersionReply], [StatusReply], [EventsSetReply],
// [EventsGetReply] and [Empty] for replies that carry nothing more. A
// reply whose status is not [StatusOK] carries the header only.
//
// Decoders check lengths and the ranges the protocol fixes, and ignore
// bytes past the fields they know, so that a peer speaking a later
// revision of protocol 1 (which may append fields) is still understood.
// Enumerations the board reports (status block, event records) are kept
// as received even when the value is unknown, so a host can skip what it
// does not know; enumerations in requests are checked, because the board
// must refuse what it cannot do.
//
// # Event records
//
// An EVENT frame (type 0x70) and each entry of an EVENTS_GET reply carry an
// 8-byte [Record]: kind u8, seq u16, then up to five bytes whose meaning
// depends on the kind. Unused bytes are sent as zero and ignored when read.
// Records of kinds this package does not know decode without error and
// keep their five bytes in [Record.Raw].
package frame
