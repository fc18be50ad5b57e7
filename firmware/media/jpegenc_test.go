package media

import "encoding/binary"

// blockJPEG writes a baseline JPEG of w x h pixels whose every MCU is one
// flat colour (only DC coefficients are coded), with luma sampled hY x vY
// times the chroma: 1x1 is 4:4:4, 2x1 4:2:2, 2x2 4:2:0, 1x2 4:4:0. The
// standard library's encoder only writes 4:2:0, so the other samplings of
// real-world clips are made here. colour gives Y, Cb, Cr of MCU (mx, my).
func blockJPEG(w, h, hY, vY int, colour func(mx, my int) (y, cb, cr uint8)) []byte {
	seg := func(b []byte, marker byte, payload ...byte) []byte {
		b = append(b, 0xFF, marker)
		b = binary.BigEndian.AppendUint16(b, uint16(len(payload)+2))
		return append(b, payload...)
	}
	out := []byte{0xFF, 0xD8}
	dqt := make([]byte, 65)
	for i := 1; i < 65; i++ {
		dqt[i] = 1
	}
	out = seg(out, 0xDB, dqt...)
	sof := []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 3,
		1, byte(hY<<4 | vY), 0, 2, 0x11, 0, 3, 0x11, 0}
	out = seg(out, 0xC0, sof...)
	// DC table: categories 0-11, every code 4 bits long (code = category).
	dc := make([]byte, 1+16+12)
	dc[0] = 0x00
	dc[1+3] = 12
	for i := range 12 {
		dc[17+i] = byte(i)
	}
	out = seg(out, 0xC4, dc...)
	// AC table: EOB (code 00) and ZRL (code 01).
	ac := make([]byte, 1+16+2)
	ac[0] = 0x10
	ac[1+1] = 2
	ac[17], ac[18] = 0x00, 0xF0
	out = seg(out, 0xC4, ac...)
	out = seg(out, 0xDA, 3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0)

	var bw bitWriter
	pred := [3]int{}
	block := func(c int, v uint8) {
		diff := 8*(int(v)-128) - pred[c]
		pred[c] += diff
		cat, mag := 0, diff
		if mag < 0 {
			mag = -mag
		}
		for mag > 0 {
			cat++
			mag >>= 1
		}
		bw.put(uint32(cat), 4)
		if cat > 0 {
			bits := diff
			if diff < 0 {
				bits = diff + (1 << cat) - 1
			}
			bw.put(uint32(bits), cat)
		}
		bw.put(0, 2) // EOB
	}
	mw, mh := 8*hY, 8*vY
	for my := 0; my < (h+mh-1)/mh; my++ {
		for mx := 0; mx < (w+mw-1)/mw; mx++ {
			y, cb, cr := colour(mx, my)
			for range hY * vY {
				block(0, y)
			}
			block(1, cb)
			block(2, cr)
		}
	}
	out = append(out, bw.flush()...)
	return append(out, 0xFF, 0xD9)
}

type bitWriter struct {
	out  []byte
	acc  uint32
	nacc int
}

func (b *bitWriter) put(v uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		b.acc = b.acc<<1 | (v>>i)&1
		b.nacc++
		if b.nacc == 8 {
			b.emit(byte(b.acc))
			b.acc, b.nacc = 0, 0
		}
	}
}

func (b *bitWriter) emit(c byte) {
	b.out = append(b.out, c)
	if c == 0xFF {
		b.out = append(b.out, 0)
	}
}

func (b *bitWriter) flush() []byte {
	for b.nacc != 0 {
		b.put(1, 1)
	}
	return b.out
}
