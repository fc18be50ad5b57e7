package media

import (
	"bytes"
	"encoding/binary"
	"image/jpeg"
)

// JPEG markers the header scan acts on. A JPEG is 0xFFD8 (SOI), then
// segments 0xFF <marker> <u16 length including itself> <payload>, up to
// 0xFFDA (SOS) where the entropy-coded data begins. The frame header
// (SOFn) gives precision u8, height u16, width u16, component count u8,
// then per component id u8, sampling (h<<4|v) u8, table u8.
const (
	markerSOI  = 0xD8
	markerSOF0 = 0xC0 // baseline
	markerSOF1 = 0xC1 // extended sequential, Huffman
	markerSOF2 = 0xC2 // progressive
	markerDHT  = 0xC4
	markerDAC  = 0xCC
	markerSOS  = 0xDA
	markerEOI  = 0xD9
)

// jpegHeader is what the header scan learns.
type jpegHeader struct {
	width, height int
	components    int
	sampling      string // such as 4:2:0
}

// scanJPEG reads the markers of a JPEG up to its first scan and checks it
// is sequential Huffman coding of an 8-bit picture the decoder handles.
func scanJPEG(b []byte) (jpegHeader, error) {
	var h jpegHeader
	if len(b) < 4 || b[0] != 0xFF || b[1] != markerSOI {
		return h, refuse(ErrMalformed, "JPEG does not start with SOI")
	}
	sawSOF := false
	for i := 2; ; {
		// Fill bytes 0xFF may precede a marker.
		for i < len(b) && b[i] == 0xFF && i+1 < len(b) && b[i+1] == 0xFF {
			i++
		}
		if i+4 > len(b) {
			return h, refuse(ErrMalformed, "JPEG ends inside its header")
		}
		if b[i] != 0xFF {
			return h, refuse(ErrMalformed, "JPEG marker expected at byte %d", i)
		}
		m := b[i+1]
		if m == markerEOI {
			return h, refuse(ErrMalformed, "JPEG ends before any picture data")
		}
		if m == 0x01 || (m >= 0xD0 && m <= 0xD7) { // TEM, RSTn: no length
			i += 2
			continue
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if n < 2 || i+2+n > len(b) {
			return h, refuse(ErrMalformed, "JPEG segment 0x%02X runs past the end", m)
		}
		seg := b[i+4 : i+2+n]
		switch {
		case m == markerSOF0 || m == markerSOF1:
			if sawSOF {
				return h, refuse(ErrMalformed, "JPEG has two frame headers")
			}
			sawSOF = true
			var err error
			if h, err = parseSOF(seg); err != nil {
				return h, err
			}
		case m == markerSOF2:
			return h, refuse(ErrCodec, "progressive JPEG is not supported; save it as baseline")
		case m >= 0xC3 && m <= 0xCF && m != markerDHT && m != markerDAC && m != 0xC8:
			return h, refuse(ErrCodec, "JPEG coding SOF%d is not supported; only baseline", m-0xC0)
		case m == markerSOS:
			if !sawSOF {
				return h, refuse(ErrMalformed, "JPEG scan before its frame header")
			}
			return h, nil
		}
		i += 2 + n
	}
}

func parseSOF(seg []byte) (jpegHeader, error) {
	var h jpegHeader
	if len(seg) < 6 {
		return h, refuse(ErrMalformed, "JPEG frame header too short")
	}
	if seg[0] != 8 {
		return h, refuse(ErrCodec, "JPEG precision %d bits is not supported; only 8", seg[0])
	}
	h.height = int(binary.BigEndian.Uint16(seg[1:]))
	h.width = int(binary.BigEndian.Uint16(seg[3:]))
	h.components = int(seg[5])
	if len(seg) < 6+3*h.components {
		return h, refuse(ErrMalformed, "JPEG frame header too short for %d components", h.components)
	}
	switch h.components {
	case 1:
		h.sampling = "grey"
	case 3:
		hy, vy := int(seg[7]>>4), int(seg[7]&15)
		hc, vc := int(seg[10]>>4), int(seg[10]&15)
		switch {
		case hc == 0 || vc == 0:
			h.sampling = "?"
		case hy == hc && vy == vc:
			h.sampling = "4:4:4"
		case hy == 2*hc && vy == vc:
			h.sampling = "4:2:2"
		case hy == 2*hc && vy == 2*vc:
			h.sampling = "4:2:0"
		case hy == hc && vy == 2*vc:
			h.sampling = "4:4:0"
		default:
			h.sampling = "other"
		}
	default:
		return h, refuse(ErrCodec, "JPEG with %d components is not supported", h.components)
	}
	return h, checkDimensions(h.width, h.height)
}

// checkJPEG checks a whole JPEG picture: the header scan, then the
// standard decoder's own reading of the frame header (which refuses the
// sampling factors it cannot decode).
func checkJPEG(b []byte) (jpegHeader, error) {
	h, err := scanJPEG(b)
	if err != nil {
		return h, err
	}
	if _, err := jpeg.DecodeConfig(bytes.NewReader(b)); err != nil {
		return h, refuse(ErrCodec, "JPEG not decodable: %v", err)
	}
	return h, nil
}
