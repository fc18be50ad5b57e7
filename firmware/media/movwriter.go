package media

import (
	"encoding/binary"
	"errors"
	"io"
)

// MOV describes a Motion-JPEG clip for WriteMOV. It exists so tests (here
// and in the screen's packages) can make clips of any shape the parser
// must accept: moov first or last, 64-bit chunk offsets, several samples
// per chunk, an audio track beside the video, odd frame rates.
type MOV struct {
	// Frames are the JPEG samples, one per frame.
	Frames [][]byte
	Width  int
	Height int
	// Timescale is units per second (default 600); Delta each frame's
	// duration in those units (default Timescale/30). Deltas, when set,
	// gives every frame its own duration instead.
	Timescale uint32
	Delta     uint32
	Deltas    []uint32
	// Codec is the sample description's fourcc (default "jpeg").
	Codec string
	// MoovFirst puts moov before mdat (a "fast start" file).
	MoovFirst bool
	// Co64 writes 64-bit chunk offsets.
	Co64 bool
	// SamplesPerChunk groups frames into chunks (default 1).
	SamplesPerChunk int
	// Audio adds a sound track, listed before the video track.
	Audio bool
}

// ErrWriteMOV means WriteMOV was given an unusable description.
var ErrWriteMOV = errors.New("media: cannot write MOV")

// WriteMOV writes m as a QuickTime file.
func WriteMOV(w io.Writer, m MOV) error {
	if len(m.Frames) == 0 || m.Width <= 0 || m.Height <= 0 || m.Width > 0xFFFF || m.Height > 0xFFFF {
		return ErrWriteMOV
	}
	if m.Timescale == 0 {
		m.Timescale = 600
	}
	if m.Delta == 0 {
		m.Delta = max(m.Timescale/30, 1)
	}
	if m.Codec == "" {
		m.Codec = "jpeg"
	}
	if len(m.Codec) != 4 || (m.Deltas != nil && len(m.Deltas) != len(m.Frames)) {
		return ErrWriteMOV
	}
	if m.SamplesPerChunk <= 0 {
		m.SamplesPerChunk = 1
	}
	var data []byte
	var rel []int64 // chunk offsets relative to the mdat payload
	for i, f := range m.Frames {
		if i%m.SamplesPerChunk == 0 {
			rel = append(rel, int64(len(data)))
		}
		data = append(data, f...)
	}
	audioAt := int64(len(data))
	audio := make([]byte, 64)
	if m.Audio {
		data = append(data, audio...)
	}
	ftyp := box("ftyp", []byte("qt  \x00\x00\x02\x00qt  "))
	build := func(base int64) []byte { return m.moov(base, rel, audioAt) }
	var out []byte
	if m.MoovFirst {
		moovLen := int64(len(build(0)))
		base := int64(len(ftyp)) + moovLen + 8
		out = append(append(append(out, ftyp...), build(base)...), box("mdat", data)...)
	} else {
		base := int64(len(ftyp)) + 8
		out = append(append(append(out, ftyp...), box("mdat", data)...), build(base)...)
	}
	_, err := w.Write(out)
	return err
}

func (m MOV) duration() uint64 {
	if m.Deltas == nil {
		return uint64(m.Delta) * uint64(len(m.Frames))
	}
	var d uint64
	for _, x := range m.Deltas {
		d += uint64(x)
	}
	return d
}

func (m MOV) moov(base int64, rel []int64, audioAt int64) []byte {
	dur := uint32(m.duration())
	mvhd := make([]byte, 100)
	be32(mvhd[12:], m.Timescale)
	be32(mvhd[16:], dur)
	be32(mvhd[20:], 0x10000)
	mvhd[24] = 1
	identity(mvhd[36:])
	be32(mvhd[96:], 3)
	var kids [][]byte
	kids = append(kids, box("mvhd", mvhd))
	if m.Audio {
		kids = append(kids, m.audioTrak(base+audioAt))
	}
	kids = append(kids, m.videoTrak(base, rel, dur))
	return box("moov", kids...)
}

func (m MOV) videoTrak(base int64, rel []int64, dur uint32) []byte {
	tkhd := make([]byte, 84)
	tkhd[3] = 0xF
	be32(tkhd[12:], 1)
	be32(tkhd[20:], dur)
	identity(tkhd[40:])
	be32(tkhd[76:], uint32(m.Width)<<16)
	be32(tkhd[80:], uint32(m.Height)<<16)

	desc := make([]byte, 86)
	be32(desc[0:], 86)
	copy(desc[4:], m.Codec)
	be16(desc[14:], 1)
	copy(desc[20:], "hfgo")
	be32(desc[28:], 512)
	be16(desc[32:], uint16(m.Width))
	be16(desc[34:], uint16(m.Height))
	be32(desc[36:], 72<<16)
	be32(desc[40:], 72<<16)
	be16(desc[48:], 1)
	desc[50] = 5
	copy(desc[51:], "mjpeg")
	be16(desc[82:], 24)
	be16(desc[84:], 0xFFFF)
	stsd := append(fullHeader(1), desc...)

	var stts []byte
	var runs uint32
	for i := range m.Frames {
		d := m.Delta
		if m.Deltas != nil {
			d = m.Deltas[i]
		}
		if n := len(stts); n > 0 && binary.BigEndian.Uint32(stts[n-4:]) == d {
			be32(stts[n-8:], binary.BigEndian.Uint32(stts[n-8:])+1)
			continue
		}
		stts = binary.BigEndian.AppendUint32(stts, 1)
		stts = binary.BigEndian.AppendUint32(stts, d)
		runs++
	}
	stts = append(fullHeader(runs), stts...)

	stsc := fullHeader(1)
	stsc = binary.BigEndian.AppendUint32(stsc, 1)
	stsc = binary.BigEndian.AppendUint32(stsc, uint32(m.SamplesPerChunk))
	stsc = binary.BigEndian.AppendUint32(stsc, 1)
	if rem := len(m.Frames) % m.SamplesPerChunk; rem != 0 && len(rel) > 1 {
		stsc = fullHeader(2)
		for _, v := range []uint32{1, uint32(m.SamplesPerChunk), 1, uint32(len(rel)), uint32(rem), 1} {
			stsc = binary.BigEndian.AppendUint32(stsc, v)
		}
	} else if rem != 0 {
		stsc = fullHeader(1)
		for _, v := range []uint32{1, uint32(rem), 1} {
			stsc = binary.BigEndian.AppendUint32(stsc, v)
		}
	}

	stsz := append(make([]byte, 8), fullHeader(uint32(len(m.Frames)))[4:]...)
	for _, f := range m.Frames {
		stsz = binary.BigEndian.AppendUint32(stsz, uint32(len(f)))
	}

	chunks := make([]int64, len(rel))
	for i, r := range rel {
		chunks[i] = base + r
	}
	vmhd := []byte{0, 0, 0, 1, 0, 0x40, 0, 0, 0, 0, 0, 0}
	stbl := box("stbl", box("stsd", stsd), box("stts", stts), box("stsc", stsc), box("stsz", stsz), m.chunkBox(chunks))
	minf := box("minf", box("vmhd", vmhd), dinf(), stbl)
	mdia := box("mdia", mdhd(m.Timescale, dur), hdlr("vide", "VideoHandler"), minf)
	return box("trak", box("tkhd", tkhd), mdia)
}

func (m MOV) audioTrak(at int64) []byte {
	tkhd := make([]byte, 84)
	tkhd[3] = 0xF
	be32(tkhd[12:], 2)
	identity(tkhd[40:])
	desc := make([]byte, 36)
	be32(desc[0:], 36)
	copy(desc[4:], "sowt")
	be16(desc[14:], 1)
	be16(desc[24:], 1)
	be16(desc[26:], 16)
	be32(desc[32:], 8000<<16)
	stts := append(fullHeader(1), 0, 0, 0, 32, 0, 0, 0, 1)
	stsc := append(fullHeader(1), 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 1)
	stsz := []byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 32} // 32 samples of 2 bytes
	stbl := box("stbl", box("stsd", append(fullHeader(1), desc...)), box("stts", stts), box("stsc", stsc), box("stsz", stsz), m.chunkBox([]int64{at}))
	smhd := make([]byte, 8)
	minf := box("minf", box("smhd", smhd), dinf(), stbl)
	mdia := box("mdia", mdhd(8000, 32), hdlr("soun", "SoundHandler"), minf)
	return box("trak", box("tkhd", tkhd), mdia)
}

func (m MOV) chunkBox(chunks []int64) []byte {
	b := fullHeader(uint32(len(chunks)))
	if m.Co64 {
		for _, c := range chunks {
			b = binary.BigEndian.AppendUint64(b, uint64(c))
		}
		return box("co64", b)
	}
	for _, c := range chunks {
		b = binary.BigEndian.AppendUint32(b, uint32(c))
	}
	return box("stco", b)
}

func mdhd(timescale, dur uint32) []byte {
	b := make([]byte, 24)
	be32(b[12:], timescale)
	be32(b[16:], dur)
	return box("mdhd", b)
}

func hdlr(subtype, name string) []byte {
	b := make([]byte, 24, 24+1+len(name))
	copy(b[4:], "mhlr")
	copy(b[8:], subtype)
	b = append(b, byte(len(name)))
	return box("hdlr", append(b, name...))
}

func dinf() []byte {
	dref := append(fullHeader(1), 0, 0, 0, 12, 'a', 'l', 'i', 's', 0, 0, 0, 1)
	return box("dinf", box("dref", dref))
}

// fullHeader is version 0, flags 0, then an entry count.
func fullHeader(count uint32) []byte {
	b := make([]byte, 8)
	be32(b[4:], count)
	return b
}

func identity(b []byte) {
	be32(b[0:], 0x10000)
	be32(b[16:], 0x10000)
	be32(b[32:], 0x40000000)
}

func box(typ string, payload ...[]byte) []byte {
	n := 8
	for _, p := range payload {
		n += len(p)
	}
	b := make([]byte, 8, n)
	be32(b, uint32(n))
	copy(b[4:], typ)
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

func be32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }
func be16(b []byte, v uint16) { binary.BigEndian.PutUint16(b, v) }
