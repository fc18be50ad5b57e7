// Package gc9a01 drives a GC9A01 round 240x240 TFT panel (and the
// ST7789, whose MIPI DCS command set it shares) over periph.io's spi.Conn
// and gpio pins. It implements hal.Display.
//
// # Wire
//
// The controller takes 4-wire SPI (mode 0, MSB first, 8-bit words) with a
// data/command pin: DC low while a command byte is clocked, DC high while
// its parameters or pixel data are. A frame is
//
//	CASET  0x2A  x0 hi, x0 lo, x1 hi, x1 lo     column window, inclusive
//	RASET  0x2B  y0 hi, y0 lo, y1 hi, y1 lo     row window, inclusive
//	RAMWR  0x2C  pixels, row by row, left to right, RGB565 big-endian
//
// after which the controller's address pointer walks the window. The
// pixel data may be cut into any number of SPI transfers (chip select
// rising between them) as long as no command byte comes between: the
// driver cuts it to the SPI driver's largest transfer (conn.Limits, the
// spidev module's bufsiz, 4096 bytes by default on Raspberry Pi OS).
//
// Pixels are RGB565 (COLMOD 0x05 on the GC9A01, 0x55 on the ST7789): five
// bits of red, six of green, five of blue, sent high byte first. The
// panel's glass is round: pixels outside the circle inscribed in the
// square are never seen, so the driver sends them black and never counts
// them as changed.
//
// # Dirty rectangles
//
// The driver keeps the frame it last sent. A new frame is compared with it
// row by row; each run of changed rows becomes one window, as wide as the
// changed columns in those rows (runs closer than MergeGap rows are
// joined, since a window costs three commands). Only those windows are
// sent, so a clip whose picture changes in its middle moves a fraction of
// the bytes of a full frame. The first frame after start (or after the
// panel was reset) is always sent whole.
//
// # Power and backlight
//
// SetPower(false) sends DISPOFF and SLPIN and turns the backlight off;
// SetPower(true) sends SLPOUT (then waits the 120 ms the controller needs)
// and DISPON and restores the backlight. The backlight pin is driven by
// PWM at BacklightHz where the pin has it; where it has not, any level
// above 0 is full on.
//
// The panel cannot be read back on most modules (no MISO), so Snapshot
// reports the frame last sent, widened from RGB565 to 8 bits a channel,
// with the mask, backlight and power applied as the simulator's does.
package gc9a01
