// Package image reads, checks and builds firmware application images in
// the ESP-IDF application image format, the format of every image a
// holofleet board boots from its ota_0 / ota_1 slots. It lives in bus/
// because it is a contract of both sides: the board checks and installs
// images with it, and the gateway looks inside images (and verifies their
// signatures) before a rollout, without importing the firmware.
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
//	     4     4  secure version (anti-rollback; zero in images packed
//	              before it, which read as 0: docs/secure-boot.md)
//	     8     8  reserved
//	    16    32  version, NUL-terminated
//	    48    32  project name, NUL-terminated
//	    80    16  build time, NUL-terminated
//	    96    16  build date, NUL-terminated
//	   112    32  framework version, NUL-terminated
//	   144    32  SHA-256 of the application's ELF (here: the executable)
//	   176     8  reserved, zero (ESP-IDF: eFuse block revisions, MMU page)
//	   184    32  first key digest to revoke, or zero (see Revocation)
//	   216    32  second key digest to revoke, or zero
//	   248     8  reserved, zero
//
// Bytes 184-255 are reserv2 in ESP-IDF's esp_app_desc_t, zero in its
// images.
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
//
// # Signatures
//
// An image may be signed as ESP-IDF's Secure Boot V2 signs applications
// with its ECDSA scheme (the ESP32-C2's): after the image (its appended
// SHA-256 included) come 0xFF bytes up to the next 4 KiB boundary, then
// one 4 KiB signature sector holding up to three signature blocks, the
// rest of the sector erased (0xFF). The signed content is every byte
// before the sector: the image and the 0xFF padding. Each block, 1216
// bytes, little-endian:
//
//	offset  size  field
//	     0     1  magic, 0xE7 (SigMagic)
//	     1     1  version, 0x03: the ECDSA scheme (0x02 would be RSA-PSS)
//	     2     1  hash scheme, 0 = SHA-256 (newer espsecure writes it; 1
//	              would be SHA-384 with P-384, not used here)
//	     3     1  reserved, zero
//	     4    32  SHA-256 of the signed content
//	    36     1  curve id, 2 = NIST P-256
//	    37    32  public key X, little-endian
//	    69    32  public key Y, little-endian
//	   101    32  signature R, little-endian
//	   133    32  signature S, little-endian
//	   165  1031  reserved, zero
//	  1196     4  CRC-32 (IEEE, as zlib) of bytes 0-1195
//	  1200    16  zero padding
//
// The signature is ECDSA over P-256 of the content's SHA-256 taken as the
// message hash (what espsecure signs with Prehashed(SHA256)): the bytes
// signed are exactly the content, bytes 0 to Image.Content. The key
// digest that names a key is the SHA-256 of block bytes 36-100 (curve id,
// X, Y), the value ESP-IDF burns into a key digest eFuse.
//
// Where this differs from ESP-IDF, on purpose:
//   - No secure padding: ESP-IDF pads the image to the 64 KiB flash MMU
//     page inside the image (esptool --secure-pad-v2) so that only signed
//     bytes are ever mapped. A host image is never mapped, so the padding
//     stops at the 4 KiB sector boundary, as espsecure pads an image that
//     is not sector-aligned.
//   - Three blocks on every chip (the ESP32-C2 reads one), so keys can be
//     rotated as on the ESP32-S3.
//   - Stricter blocks: the hash scheme and reserved bytes must be zero, the
//     16 padding bytes (outside the CRC) must be zero, and the sector after
//     the last block must be erased. A bit flipped anywhere in a block or
//     in the sector is thereby refused, not only where the CRC looks.
//   - Only P-256 and SHA-256. P-192 (which Go's standard library lacks)
//     and P-384 blocks are reported malformed; RSA blocks too.
//
// # Revocation
//
// ESP-IDF revokes a key when the application, signed by a newer key and
// up after an update, asks the eFuse controller to. Here the image says
// so in its description (bytes 184-247 above, inside the signed content,
// so no one can add a revocation to a signed image without the
// signature failing): up to MaxRevoke key digests. A board applies them
// once the image has confirmed itself after its trial, and only to keys
// burned before a key that signed the image (a later key revokes an
// earlier one, never the reverse); see package efuse. holoctl image pack
// --revoke writes them.
//
// # API for signing and checking
//
//   - Sign(img, key) appends a block (padding and adding the sector when
//     the image has none); GenerateKey, MarshalPrivateKey,
//     MarshalPublicKey, ParsePrivateKey, ParsePublicKey read and write PEM.
//   - DigestOf(pub) names a key; ParseKeyDigest reads one in hex.
//   - Verifier, Verify, VerifyAt, VerifyBytes and Inspect take the sector
//     as part of the image: the resulting Image has Content, Digest, Blocks
//     (each parsed, malformed ones with Err) and SectorErr. ParseSector
//     decodes a sector alone.
//   - Trust{Keys, Revoked}.Check(im) returns the trusted signers (key
//     digests whose blocks verify) or why there are none: an error
//     wrapping ErrBadSignature, ErrBadBlock, ErrRevokedKey,
//     ErrUntrustedKey or ErrUnsigned, in that order of precedence.
//     CheckBlocks gives the verdict block by block; Signers lists every
//     key whose block verifies, trusted or not.
//
// A board with no key burned (Trust.Enabled false) checks no signature;
// its images may carry a sector or not.
package image
