// Package image reads, checks and builds firmware application images in
// the ESP-IDF application image format, the format of every image a
// holofleet board boots from its ota_0 / ota_1 slots. The gateway imports
// it too, to look inside images before a rollout.
//
// # Layout
//
// All integers are little-endian.
//
//	offset  size  field
//	------  ----  ---------------------------------------------------------
//	     0     1  magic, 0xE9
//	     1     1  segment count, 1-16
//	     2     1  SPI flash mode
//	     3     1  SPI speed (low nibble) and flash size (high nibble)
//	     4     4  entry point address
//	     8     1  WP pin
//	     9     3  SPI pin drive settings
//	    12     2  chip id (ChipHost for host builds, see below)
//	    14     1  minimum chip revision (legacy, one byte)
//	    15     2  minimum chip revision, major*100+minor
//	    17     2  maximum chip revision, major*100+minor
//	    19     4  reserved, zero
//	    23     1  hash appended: 1 when a SHA-256 follows the checksum
//	    24        the segments, each an 8-byte header then its data:
//	               +0 load address u32, +4 data length u32 (a multiple of 4)
//	              zero padding, then one checksum byte placed so that the
//	              image up to and including it is a multiple of 16 bytes;
//	              the checksum is 0xEF XORed with every byte of segment data
//	              (headers and padding are not included)
//	              when hash appended: the SHA-256 of every byte before it
//
// The first segment begins with the 256-byte application description:
//
//	offset  size  field
//	     0     4  magic word 0xABCD5432
//	     4     4  secure version
//	     8     8  reserved
//	    16    32  version, NUL-terminated
//	    48    32  project name, NUL-terminated
//	    80    16  build time, NUL-terminated
//	    96    16  build date, NUL-terminated
//	   112    32  framework version, NUL-terminated
//	   144    32  SHA-256 of the application's ELF (here: the executable)
//	   176    80  reserved, zero
//
// The first EarlyCheckSize (288) bytes, image header + first segment
// header + application description, say what the image is: an
// application, for which chip, of which project. An update checks them as
// soon as they arrive (EarlyCheck) and refuses a wrong image before the
// rest is sent; Verifier checks everything else as the bytes stream by.
//
// # Host images
//
// A simulated board runs holo-board as a host executable. Its images use
// the chip id ChipHost (0x484F, the bytes "OH"), outside the range of
// Espressif's chip ids (which are small numbers, 0xFFFF meaning invalid),
// so no ESP32 accepts a host image and no host board accepts an ESP32
// image. A host image has exactly two segments: the application
// description at LoadDesc, and the executable at LoadPayload, zero-padded
// to a multiple of 4 (executables ignore trailing bytes). The description's
// ELF SHA-256 is the SHA-256 of the executable before padding.
package image
