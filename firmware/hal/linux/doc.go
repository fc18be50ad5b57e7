// Package linux is the board's HAL on real parts wired to a Linux
// single-board computer (a Raspberry Pi Zero 2 W, or any board whose
// kernel exposes spidev, i2c-dev and GPIO character devices): the second
// implementation of the hal interfaces beside the simulator.
//
// A [Description] (a small JSON file, see docs/hardware.md) says which
// parts are wired where:
//
//   - display: a GC9A01 (or ST7789) on an SPI bus and chip select, with DC,
//     RST and backlight pins and the SPI clock (package gc9a01);
//   - leds: a WS2812 or APA102 strip on an SPI bus (package strip);
//   - servos: a PCA9685 on an I2C bus at an address, the pan and tilt
//     channels and the pulse range the servos take (package servo);
//   - touch: a CST816S touch controller on an I2C bus, with its interrupt
//     pin (package cst816s), or none;
//   - boot_button and attn: GPIO pins;
//   - link: the host link's UART (a transport address, with kernel RS485
//     direction control as bus/transport spells it).
//
// [Check] validates a description without touching hardware; [Open]
// opens every part through a [Host] and reports every part that could not
// be opened in one error, each naming the part, the device and what to
// check. The real Host is periph.io's host drivers ([PeriphHost], which
// runs host.Init on first use); tests open the same descriptions on
// periph's fakes (package linuxtest), so nothing here needs hardware to be
// tested.
//
// A part the description leaves out is absent: the firmware still offers
// its API, on the simulator's stand-in for the part, and [Devices.Absent]
// lists it so the board can say so.
//
// What Linux user space cannot do: be an I2C target (the kernel's
// i2c-dev is a controller; target mode needs a kernel slave backend), so a
// board on this HAL serves the host link over UART or RS485 only.
package linux
