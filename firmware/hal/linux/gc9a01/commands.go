package gc9a01

import "time"

// MIPI DCS commands both controllers share.
const (
	CmdSWReset  byte = 0x01 // software reset; wait 120 ms (ST7789: 150 ms)
	CmdSleepIn  byte = 0x10 // enter sleep: the panel stops refreshing
	CmdSleepOut byte = 0x11 // leave sleep; wait 120 ms before the next command
	CmdNormalOn byte = 0x13 // normal display mode (no partial area)
	CmdInvOn    byte = 0x21 // display inversion on (IPS panels need it)
	CmdDispOff  byte = 0x28 // display off: the glass shows nothing
	CmdDispOn   byte = 0x29 // display on
	CmdCASet    byte = 0x2A // column address set: x0, x1 as big-endian u16
	CmdRASet    byte = 0x2B // row address set: y0, y1 as big-endian u16
	CmdRAMWr    byte = 0x2C // memory write: pixel data follows
	CmdTEOn     byte = 0x35 // tearing-effect line on
	CmdMADCtl   byte = 0x36 // memory access control: scan order, BGR
	CmdColMod   byte = 0x3A // interface pixel format
)

// Variant is the controller on the panel.
type Variant int

// Controllers the driver knows.
const (
	// GC9A01 is Galaxycore's round 240x240 controller.
	GC9A01 Variant = iota
	// ST7789 is Sitronix's 240x320 controller, as on square 240x240
	// modules (and round ones made from them).
	ST7789
)

func (v Variant) String() string {
	switch v {
	case GC9A01:
		return "gc9a01"
	case ST7789:
		return "st7789"
	}
	return "unknown"
}

// ParseVariant reads a controller name as written in a hardware
// description ("gc9a01" or "st7789").
func ParseVariant(s string) (Variant, bool) {
	switch s {
	case "gc9a01", "GC9A01":
		return GC9A01, true
	case "st7789", "ST7789":
		return ST7789, true
	}
	return 0, false
}

// step is one command of an init sequence: the command, its parameters,
// and how long to wait after it.
type step struct {
	cmd   byte
	data  []byte
	delay time.Duration
}

// gc9a01Init brings a GC9A01 from reset to showing RGB565. Most of it sets
// the controller's power, gate and gamma registers to the values its
// maker gives for 240x240 round panels; they sit behind the "inter
// register enable" commands 0xFE and 0xEF. The tail is standard DCS.
var gc9a01Init = []step{
	{cmd: 0xEF},
	{cmd: 0xEB, data: []byte{0x14}},
	{cmd: 0xFE}, // inter register enable 1
	{cmd: 0xEF}, // inter register enable 2
	{cmd: 0xEB, data: []byte{0x14}},
	{cmd: 0x84, data: []byte{0x40}},
	{cmd: 0x85, data: []byte{0xFF}},
	{cmd: 0x86, data: []byte{0xFF}},
	{cmd: 0x87, data: []byte{0xFF}},
	{cmd: 0x88, data: []byte{0x0A}},
	{cmd: 0x89, data: []byte{0x21}},
	{cmd: 0x8A, data: []byte{0x00}},
	{cmd: 0x8B, data: []byte{0x80}},
	{cmd: 0x8C, data: []byte{0x01}},
	{cmd: 0x8D, data: []byte{0x01}},
	{cmd: 0x8E, data: []byte{0xFF}},
	{cmd: 0x8F, data: []byte{0xFF}},
	{cmd: 0xB6, data: []byte{0x00, 0x20}}, // display function control: gate scan direction
	{cmd: CmdMADCtl, data: []byte{0x08}},  // row/column order as wired, BGR panel
	{cmd: CmdColMod, data: []byte{0x05}},  // 16 bits per pixel
	{cmd: 0x90, data: []byte{0x08, 0x08, 0x08, 0x08}},
	{cmd: 0xBD, data: []byte{0x06}},
	{cmd: 0xBC, data: []byte{0x00}},
	{cmd: 0xFF, data: []byte{0x60, 0x01, 0x04}},
	{cmd: 0xC3, data: []byte{0x13}}, // power control 2
	{cmd: 0xC4, data: []byte{0x13}}, // power control 3
	{cmd: 0xC9, data: []byte{0x22}}, // power control 4
	{cmd: 0xBE, data: []byte{0x11}},
	{cmd: 0xE1, data: []byte{0x10, 0x0E}},
	{cmd: 0xDF, data: []byte{0x21, 0x0C, 0x02}},
	{cmd: 0xF0, data: []byte{0x45, 0x09, 0x08, 0x08, 0x26, 0x2A}}, // gamma 1
	{cmd: 0xF1, data: []byte{0x43, 0x70, 0x72, 0x36, 0x37, 0x6F}}, // gamma 2
	{cmd: 0xF2, data: []byte{0x45, 0x09, 0x08, 0x08, 0x26, 0x2A}}, // gamma 3
	{cmd: 0xF3, data: []byte{0x43, 0x70, 0x72, 0x36, 0x37, 0x6F}}, // gamma 4
	{cmd: 0xED, data: []byte{0x1B, 0x0B}},
	{cmd: 0xAE, data: []byte{0x77}},
	{cmd: 0xCD, data: []byte{0x63}},
	{cmd: 0x70, data: []byte{0x07, 0x07, 0x04, 0x0E, 0x0F, 0x09, 0x07, 0x08, 0x03}},
	{cmd: 0xE8, data: []byte{0x34}}, // frame rate
	{cmd: 0x62, data: []byte{0x18, 0x0D, 0x71, 0xED, 0x70, 0x70, 0x18, 0x0F, 0x71, 0xEF, 0x70, 0x70}},
	{cmd: 0x63, data: []byte{0x18, 0x11, 0x71, 0xF1, 0x70, 0x70, 0x18, 0x13, 0x71, 0xF3, 0x70, 0x70}},
	{cmd: 0x64, data: []byte{0x28, 0x29, 0xF1, 0x01, 0xF1, 0x00, 0x07}},
	{cmd: 0x66, data: []byte{0x3C, 0x00, 0xCD, 0x67, 0x45, 0x45, 0x10, 0x00, 0x00, 0x00}},
	{cmd: 0x67, data: []byte{0x00, 0x3C, 0x00, 0x00, 0x00, 0x01, 0x54, 0x10, 0x32, 0x98}},
	{cmd: 0x74, data: []byte{0x10, 0x85, 0x80, 0x00, 0x00, 0x4E, 0x00}},
	{cmd: 0x98, data: []byte{0x3E, 0x07}},
	{cmd: CmdTEOn},
	{cmd: CmdInvOn},
	{cmd: CmdSleepOut, delay: 120 * time.Millisecond},
	{cmd: CmdDispOn, delay: 20 * time.Millisecond},
}

// st7789Init brings an ST7789 from reset to showing RGB565: it needs
// nothing beyond standard DCS.
var st7789Init = []step{
	{cmd: CmdSWReset, delay: 150 * time.Millisecond},
	{cmd: CmdSleepOut, delay: 120 * time.Millisecond},
	{cmd: CmdColMod, data: []byte{0x55}, delay: 10 * time.Millisecond}, // 16 bits per pixel, 65k colours
	{cmd: CmdMADCtl, data: []byte{0x00}},                               // top to bottom, left to right, RGB
	{cmd: CmdInvOn},
	{cmd: CmdNormalOn, delay: 10 * time.Millisecond},
	{cmd: CmdDispOn, delay: 20 * time.Millisecond},
}

// initSequence is the variant's sequence.
func initSequence(v Variant) []step {
	if v == ST7789 {
		return st7789Init
	}
	return gc9a01Init
}
