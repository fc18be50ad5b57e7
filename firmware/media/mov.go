package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"sort"
	"time"
)

// topLevelAtoms are the atom types a MOV file may start with.
var topLevelAtoms = map[string]bool{
	"ftyp": true, "moov": true, "mdat": true, "wide": true, "free": true, "skip": true, "pnot": true,
}

// Accepted Motion-JPEG sample descriptions (see the package doc).
var mjpegCodecs = map[string]bool{"jpeg": true, "mjpa": true}

// atom is one atom: its type and its payload's place.
type atom struct {
	typ  string
	off  int64 // payload offset within the reader or buffer
	size int64 // payload size
}

// readAtomHeader reads the atom header at off of a reader of size end.
func readAtomHeader(r io.ReaderAt, off, end int64) (atom, error) {
	var hdr [16]byte
	if end-off < 8 {
		return atom{}, refuse(ErrMalformed, "MOV: %d stray bytes at offset %d", end-off, off)
	}
	if _, err := r.ReadAt(hdr[:8], off); err != nil {
		return atom{}, refuse(ErrMalformed, "MOV: reading atom at %d: %v", off, err)
	}
	size := int64(binary.BigEndian.Uint32(hdr[:4]))
	typ := string(hdr[4:8])
	hlen := int64(8)
	switch size {
	case 0:
		size = end - off
	case 1:
		if end-off < 16 {
			return atom{}, refuse(ErrMalformed, "MOV: atom %q: 64-bit size cut off", printable(typ))
		}
		if _, err := r.ReadAt(hdr[8:16], off+8); err != nil {
			return atom{}, refuse(ErrMalformed, "MOV: reading atom at %d: %v", off, err)
		}
		u := binary.BigEndian.Uint64(hdr[8:16])
		if u > uint64(end-off) {
			return atom{}, refuse(ErrMalformed, "MOV: atom %q of %d bytes runs past the end (truncated file?)", printable(typ), u)
		}
		size = int64(u)
		hlen = 16
	}
	if size < hlen {
		return atom{}, refuse(ErrMalformed, "MOV: atom %q has impossible size %d", printable(typ), size)
	}
	if size > end-off {
		return atom{}, refuse(ErrMalformed, "MOV: atom %q of %d bytes runs past the end (truncated file?)", printable(typ), size)
	}
	return atom{typ: typ, off: off + hlen, size: size - hlen}, nil
}

func printable(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7E {
			b[i] = '?'
		}
	}
	return string(b)
}

// children lists the atoms inside buf (a container's payload).
func children(buf []byte) ([]atom, error) {
	r := byteReaderAt(buf)
	var out []atom
	for off := int64(0); off < int64(len(buf)); {
		if int64(len(buf))-off < 8 && allZero(buf[off:]) {
			break // some writers pad containers with a zero terminator
		}
		a, err := readAtomHeader(r, off, int64(len(buf)))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
		off = a.off + a.size
	}
	return out, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

type byteReaderAt []byte

func (b byteReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func find(buf []byte, typ string) ([]byte, bool, error) {
	kids, err := children(buf)
	if err != nil {
		return nil, false, err
	}
	for _, a := range kids {
		if a.typ == typ {
			return buf[a.off : a.off+a.size], true, nil
		}
	}
	return nil, false, nil
}

// movie is what the parser learns from a MOV's video track.
type movie struct {
	size      int64
	codec     string
	width     int
	height    int
	timescale uint32
	stts      []sttsEntry
	offsets   []int64
	sizes     []uint32
	duration  uint64 // sum of sample durations, in timescale units
	starts    []uint64
}

type sttsEntry struct{ count, delta uint32 }

// parseMOV reads the atoms of a MOV file of the given size.
func parseMOV(r io.ReaderAt, size int64) (*movie, error) {
	var moov *atom
	for off := int64(0); off < size; {
		a, err := readAtomHeader(r, off, size)
		if err != nil {
			return nil, err
		}
		if off == 0 && !topLevelAtoms[a.typ] {
			return nil, refuse(ErrFormat, "not a MOV file")
		}
		if a.typ == "moov" {
			if moov != nil {
				return nil, refuse(ErrMalformed, "MOV: two moov atoms")
			}
			aa := a
			moov = &aa
		}
		off = a.off + a.size
	}
	if moov == nil {
		return nil, refuse(ErrMalformed, "MOV: no moov atom (truncated file?)")
	}
	if moov.size > MaxMoov {
		return nil, refuse(ErrLimit, "MOV: moov atom of %d bytes is over the %d-byte limit", moov.size, MaxMoov)
	}
	buf := make([]byte, moov.size)
	if _, err := r.ReadAt(buf, moov.off); err != nil && !(errors.Is(err, io.EOF) && moov.off+moov.size == size) {
		return nil, refuse(ErrMalformed, "MOV: reading moov: %v", err)
	}
	kids, err := children(buf)
	if err != nil {
		return nil, err
	}
	sawTrack := false
	var firstErr error
	for _, a := range kids {
		if a.typ != "trak" {
			continue
		}
		sawTrack = true
		m, isVideo, err := parseTrack(buf[a.off : a.off+a.size])
		if !isVideo {
			continue
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		m.size = size
		if err := m.checkSamples(r); err != nil {
			return nil, err
		}
		return m, nil
	}
	switch {
	case firstErr != nil:
		return nil, firstErr
	case sawTrack:
		return nil, refuse(ErrCodec, "MOV has no video track")
	}
	return nil, refuse(ErrMalformed, "MOV has no tracks")
}

// parseTrack reads one trak; isVideo reports a "vide" handler.
func parseTrack(trak []byte) (m *movie, isVideo bool, err error) {
	mdia, ok, err := find(trak, "mdia")
	if err != nil || !ok {
		return nil, false, err
	}
	hdlr, ok, err := find(mdia, "hdlr")
	if err != nil || !ok {
		return nil, false, err
	}
	if len(hdlr) < 12 || string(hdlr[8:12]) != "vide" {
		return nil, false, nil
	}
	m = &movie{}
	mdhd, ok, err := find(mdia, "mdhd")
	if err != nil {
		return nil, true, err
	}
	if !ok {
		return nil, true, refuse(ErrMalformed, "MOV: video track without mdhd")
	}
	switch {
	case len(mdhd) >= 24 && mdhd[0] == 0:
		m.timescale = binary.BigEndian.Uint32(mdhd[12:])
	case len(mdhd) >= 36 && mdhd[0] == 1:
		m.timescale = binary.BigEndian.Uint32(mdhd[20:])
	default:
		return nil, true, refuse(ErrMalformed, "MOV: bad mdhd")
	}
	if m.timescale == 0 {
		return nil, true, refuse(ErrMalformed, "MOV: time scale is 0")
	}
	minf, ok, err := find(mdia, "minf")
	if err != nil {
		return nil, true, err
	}
	if !ok {
		return nil, true, refuse(ErrMalformed, "MOV: video track without minf")
	}
	stbl, ok, err := find(minf, "stbl")
	if err != nil {
		return nil, true, err
	}
	if !ok {
		return nil, true, refuse(ErrMalformed, "MOV: video track without stbl")
	}
	tables := map[string][]byte{}
	kids, err := children(stbl)
	if err != nil {
		return nil, true, err
	}
	for _, a := range kids {
		if _, dup := tables[a.typ]; !dup {
			tables[a.typ] = stbl[a.off : a.off+a.size]
		}
	}
	for _, need := range []string{"stsd", "stts", "stsc", "stsz"} {
		if _, ok := tables[need]; !ok {
			return nil, true, refuse(ErrMalformed, "MOV: video track without %s", need)
		}
	}
	if err := m.parseSTSD(tables["stsd"]); err != nil {
		return nil, true, err
	}
	if err := m.parseSTSZ(tables["stsz"]); err != nil {
		return nil, true, err
	}
	if err := m.parseSTTS(tables["stts"]); err != nil {
		return nil, true, err
	}
	var chunks []int64
	switch {
	case tables["stco"] != nil:
		chunks, err = parseChunkOffsets(tables["stco"], 4)
	case tables["co64"] != nil:
		chunks, err = parseChunkOffsets(tables["co64"], 8)
	default:
		err = refuse(ErrMalformed, "MOV: video track without stco or co64")
	}
	if err != nil {
		return nil, true, err
	}
	if err := m.parseSTSC(tables["stsc"], chunks); err != nil {
		return nil, true, err
	}
	return m, true, nil
}

// fullAtom checks a table's version/flags and entry count, returning the
// entries' bytes, checked to hold count entries of n bytes each.
func table(name string, b []byte, skip, n int) (count int, entries []byte, err error) {
	if len(b) < 4+skip+4 {
		return 0, nil, refuse(ErrMalformed, "MOV: %s too short", name)
	}
	c := binary.BigEndian.Uint32(b[4+skip:])
	entries = b[8+skip:]
	if n > 0 && uint64(c)*uint64(n) > uint64(len(entries)) {
		return 0, nil, refuse(ErrMalformed, "MOV: %s claims %d entries, has room for %d", name, c, len(entries)/n)
	}
	if c > MaxFrames {
		return 0, nil, refuse(ErrLimit, "MOV: %s has %d entries, over the %d limit", name, c, MaxFrames)
	}
	return int(c), entries, nil
}

func (m *movie) parseSTSD(b []byte) error {
	count, entries, err := table("stsd", b, 0, 0)
	if err != nil {
		return err
	}
	if count < 1 || len(entries) < 8 {
		return refuse(ErrMalformed, "MOV: stsd has no sample description")
	}
	if count > 1 {
		return refuse(ErrCodec, "MOV: video track with %d sample descriptions; only one is supported", count)
	}
	codec := string(entries[4:8])
	if !mjpegCodecs[codec] {
		return refuse(ErrCodec, "video codec %q is not Motion-JPEG (jpeg or mjpa)", printable(codec))
	}
	m.codec = codec
	// 8 header, 6 reserved, 2 data reference, 16 version/revision/vendor/
	// quality, then width u16 and height u16.
	if len(entries) < 36 {
		return refuse(ErrMalformed, "MOV: video sample description too short")
	}
	m.width = int(binary.BigEndian.Uint16(entries[32:]))
	m.height = int(binary.BigEndian.Uint16(entries[34:]))
	return checkDimensions(m.width, m.height)
}

func (m *movie) parseSTSZ(b []byte) error {
	if len(b) < 12 {
		return refuse(ErrMalformed, "MOV: stsz too short")
	}
	fixed := binary.BigEndian.Uint32(b[4:])
	n := 0
	if fixed == 0 {
		n = 4
	}
	count, entries, err := table("stsz", b, 4, n)
	if err != nil {
		return err
	}
	if count == 0 {
		return refuse(ErrMalformed, "MOV: clip has no frames")
	}
	m.sizes = make([]uint32, count)
	for i := range m.sizes {
		s := fixed
		if fixed == 0 {
			s = binary.BigEndian.Uint32(entries[4*i:])
		}
		if s == 0 {
			return refuse(ErrMalformed, "MOV: frame %d is empty", i)
		}
		if s > MaxSample {
			return refuse(ErrLimit, "MOV: frame %d of %d bytes is over the %d-byte limit", i, s, MaxSample)
		}
		m.sizes[i] = s
	}
	return nil
}

func (m *movie) parseSTTS(b []byte) error {
	count, entries, err := table("stts", b, 0, 8)
	if err != nil {
		return err
	}
	total := uint64(0)
	m.starts = make([]uint64, 0, count)
	for i := range count {
		e := sttsEntry{binary.BigEndian.Uint32(entries[8*i:]), binary.BigEndian.Uint32(entries[8*i+4:])}
		if e.count == 0 {
			continue
		}
		if total+uint64(e.count) > uint64(len(m.sizes)) {
			return refuse(ErrMalformed, "MOV: stts times more samples than stsz has (%d)", len(m.sizes))
		}
		m.starts = append(m.starts, total)
		m.stts = append(m.stts, e)
		total += uint64(e.count)
		m.duration += uint64(e.count) * uint64(e.delta)
	}
	if total != uint64(len(m.sizes)) {
		return refuse(ErrMalformed, "MOV: stts times %d samples, stsz has %d", total, len(m.sizes))
	}
	if m.duration == 0 {
		return refuse(ErrMalformed, "MOV: clip has no duration")
	}
	return nil
}

func parseChunkOffsets(b []byte, width int) ([]int64, error) {
	name := "stco"
	if width == 8 {
		name = "co64"
	}
	count, entries, err := table(name, b, 0, width)
	if err != nil {
		return nil, err
	}
	out := make([]int64, count)
	for i := range out {
		var v uint64
		if width == 4 {
			v = uint64(binary.BigEndian.Uint32(entries[4*i:]))
		} else {
			v = binary.BigEndian.Uint64(entries[8*i:])
		}
		if v > 1<<62 {
			return nil, refuse(ErrMalformed, "MOV: chunk %d offset %d is impossible", i, v)
		}
		out[i] = int64(v)
	}
	return out, nil
}

// parseSTSC places every sample: chunk offsets plus the sizes of the
// samples before it in its chunk.
func (m *movie) parseSTSC(b []byte, chunks []int64) error {
	count, entries, err := table("stsc", b, 0, 12)
	if err != nil {
		return err
	}
	if count == 0 {
		return refuse(ErrMalformed, "MOV: stsc is empty")
	}
	m.offsets = make([]int64, len(m.sizes))
	sample := 0
	for i := range count {
		first := binary.BigEndian.Uint32(entries[12*i:])
		per := binary.BigEndian.Uint32(entries[12*i+4:])
		if first < 1 || (i == 0 && first != 1) {
			return refuse(ErrMalformed, "MOV: stsc entry %d starts at chunk %d", i, first)
		}
		last := uint32(len(chunks)) // chunks this entry covers: first..last
		if i+1 < count {
			next := binary.BigEndian.Uint32(entries[12*(i+1):])
			if next <= first {
				return refuse(ErrMalformed, "MOV: stsc chunks out of order")
			}
			last = next - 1
		}
		if last > uint32(len(chunks)) {
			return refuse(ErrMalformed, "MOV: stsc names chunk %d of %d", last, len(chunks))
		}
		if per == 0 || per > MaxFrames {
			return refuse(ErrMalformed, "MOV: stsc entry %d has %d samples per chunk", i, per)
		}
		for c := first; c <= last && sample < len(m.sizes); c++ {
			off := chunks[c-1]
			for k := uint32(0); k < per && sample < len(m.sizes); k++ {
				m.offsets[sample] = off
				off += int64(m.sizes[sample])
				sample++
			}
		}
	}
	if sample != len(m.sizes) {
		return refuse(ErrMalformed, "MOV: chunks hold %d samples, stsz has %d", sample, len(m.sizes))
	}
	return nil
}

// checkSamples checks every sample lies in the file and the first is a
// JPEG the decoder takes, of the size the track declares.
func (m *movie) checkSamples(r io.ReaderAt) error {
	for i, off := range m.offsets {
		if off < 0 || off+int64(m.sizes[i]) > m.size {
			return refuse(ErrMalformed, "MOV: frame %d lies past the end of the file (truncated?)", i)
		}
	}
	first, err := m.sample(r, 0)
	if err != nil {
		return err
	}
	h, err := checkJPEG(first)
	if err != nil {
		return fmt.Errorf("MOV frame 0: %w", err)
	}
	if h.width != m.width || h.height != m.height {
		// The JPEG is what gets drawn; trust it over the track header.
		m.width, m.height = h.width, h.height
	}
	return nil
}

func (m *movie) sample(r io.ReaderAt, i int) ([]byte, error) {
	buf := make([]byte, m.sizes[i])
	if _, err := r.ReadAt(buf, m.offsets[i]); err != nil && !(errors.Is(err, io.EOF) && m.offsets[i]+int64(len(buf)) == m.size) {
		return nil, refuse(ErrMalformed, "MOV: reading frame %d: %v", i, err)
	}
	return buf, nil
}

// delay returns the duration of sample i.
func (m *movie) delay(i int) time.Duration {
	k := sort.Search(len(m.starts), func(k int) bool { return m.starts[k] > uint64(i) }) - 1
	if k < 0 {
		return 0
	}
	return time.Duration(uint64(m.stts[k].delta) * uint64(time.Second) / uint64(m.timescale))
}

func (m *movie) info() Info {
	n := len(m.sizes)
	fps := float64(n) * float64(m.timescale) / float64(m.duration)
	return Info{Kind: KindClip, Format: FormatMOV, Codec: m.codec, Size: m.size,
		Width: m.width, Height: m.height, Frames: n, FPS: roundFPS(fps),
		DurationMS: int64(m.duration * 1000 / uint64(m.timescale))}
}

// movieClip decodes a MOV clip's frames from its reader.
type movieClip struct {
	r   io.ReaderAt
	m   *movie
	buf []byte
}

func newMovieClip(r io.ReaderAt, m *movie) *movieClip { return &movieClip{r: r, m: m} }

func (c *movieClip) Info() Info   { return c.m.info() }
func (c *movieClip) Frames() int  { return len(c.m.sizes) }
func (c *movieClip) FPS() float64 { return c.m.info().FPS }
func (c *movieClip) Width() int   { return c.m.width }
func (c *movieClip) Height() int  { return c.m.height }

func (c *movieClip) Delay(i int) time.Duration {
	if i < 0 || i >= len(c.m.sizes) {
		return 0
	}
	return c.m.delay(i)
}

// Frame reads sample i into a reused buffer and decodes it.
func (c *movieClip) Frame(i int) (image.Image, error) {
	if i < 0 || i >= len(c.m.sizes) {
		return nil, fmt.Errorf("%w: %d of %d", ErrFrameIndex, i, len(c.m.sizes))
	}
	n := int(c.m.sizes[i])
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	buf := c.buf[:n]
	if _, err := c.r.ReadAt(buf, c.m.offsets[i]); err != nil && !(errors.Is(err, io.EOF) && c.m.offsets[i]+int64(n) == c.m.size) {
		return nil, refuse(ErrMalformed, "MOV: reading frame %d: %v", i, err)
	}
	img, err := decodeFrame(buf)
	if err != nil {
		return nil, fmt.Errorf("MOV frame %d: %w", i, err)
	}
	return img, nil
}

// decodeFrame decodes one Motion-JPEG sample: its header is scanned first
// (coding, precision, size within the screen), so the decoder never
// allocates for a picture the board would not show.
func decodeFrame(buf []byte) (image.Image, error) {
	if _, err := scanJPEG(buf); err != nil {
		return nil, err
	}
	img, err := jpeg.Decode(bytes.NewReader(buf))
	if err != nil {
		return nil, refuse(ErrMalformed, "JPEG: %v", err)
	}
	if b := img.Bounds(); b.Dx() > MaxWidth || b.Dy() > MaxHeight {
		return nil, refuse(ErrDimensions, "JPEG is %dx%d", b.Dx(), b.Dy())
	}
	return img, nil
}

func (c *movieClip) Close() error {
	if cl, ok := c.r.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
