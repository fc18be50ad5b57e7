package frame

import (
	"encoding/binary"
	"fmt"
)

// StatusBlockLen is the size of the status block in protocol 1. A longer
// block comes from a later revision; the bytes past these are ignored.
const StatusBlockLen = 12

// NoRemaining in StatusBlock.Remaining means no duration is counting down.
const NoRemaining = 0xFFFF

// Scene values of StatusBlock.Scene besides a slot number.
const (
	SceneNone   = 0    // no scene running to its end
	SceneNoSlot = 0xFF // a scene without a slot is running to its end
)

// StatusFlags is status block byte 11.
type StatusFlags uint8

// Status flags.
const (
	FlagTouch     StatusFlags = 1 << 0 // touch reporting is on
	FlagHoloReady StatusFlags = 1 << 1 // the holo can move
)

// StatusBlock is the board's state in 12 bytes: the body of a STATUS
// reply and bytes 1-12 of the I2C STATUS register.
//
//	byte  field       values
//	0     showing     Showing
//	1     scene       slot of the scene running to its end; 0 none; 0xFF no slot
//	2-3   remaining   tenths of a second left of duration_s; 0xFFFF none
//	4     holo        HoloState
//	5     leds        LEDMode (0-4)
//	6     backlight   percent 0-100
//	7     brightness  LED percent 0-100
//	8-9   seq         latest event number, 0 none yet
//	10    last_status Status of the last request over the link
//	11    flags       StatusFlags
type StatusBlock struct {
	Showing    Showing
	Scene      uint8
	Remaining  uint16
	Holo       HoloState
	LEDs       LEDMode
	Backlight  uint8
	Brightness uint8
	Seq        uint16
	LastStatus Status
	Flags      StatusFlags
}

func (s StatusBlock) check() error {
	if s.Backlight > 100 {
		return fmt.Errorf("%w: backlight %d", ErrRange, s.Backlight)
	}
	if s.Brightness > 100 {
		return fmt.Errorf("%w: brightness %d", ErrRange, s.Brightness)
	}
	return nil
}

// AppendBinary appends the 12 bytes of s to b.
func (s StatusBlock) AppendBinary(b []byte) ([]byte, error) {
	if err := s.check(); err != nil {
		return b, fmt.Errorf("status block: %w", err)
	}
	b = append(b, byte(s.Showing), s.Scene)
	b = binary.LittleEndian.AppendUint16(b, s.Remaining)
	b = append(b, byte(s.Holo), byte(s.LEDs), s.Backlight, s.Brightness)
	b = binary.LittleEndian.AppendUint16(b, s.Seq)
	return append(b, byte(s.LastStatus), byte(s.Flags)), nil
}

// UnmarshalBinary reads a status block of at least 12 bytes; bytes past
// the twelfth are ignored. Enumeration values are kept as read.
func (s *StatusBlock) UnmarshalBinary(b []byte) error {
	if len(b) < StatusBlockLen {
		return fmt.Errorf("status block: %d bytes: %w", len(b), ErrShort)
	}
	v := StatusBlock{
		Showing:    Showing(b[0]),
		Scene:      b[1],
		Remaining:  binary.LittleEndian.Uint16(b[2:]),
		Holo:       HoloState(b[4]),
		LEDs:       LEDMode(b[5]),
		Backlight:  b[6],
		Brightness: b[7],
		Seq:        binary.LittleEndian.Uint16(b[8:]),
		LastStatus: Status(b[10]),
		Flags:      StatusFlags(b[11]),
	}
	if err := v.check(); err != nil {
		return fmt.Errorf("status block: %w", err)
	}
	*s = v
	return nil
}
