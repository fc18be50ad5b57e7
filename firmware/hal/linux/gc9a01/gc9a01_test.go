package gc9a01_test

import (
	"errors"
	"flag"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"periph.io/x/conn/v3"
	"periph.io/x/conn/v3/conntest"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"
	"periph.io/x/conn/v3/spi/spitest"

	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01"
	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01/gc9a01test"
)

var update = flag.Bool("update", false, "rewrite the golden recordings in testdata/")

func noSleep(time.Duration) {}

// rig is a driver on a fake panel with fake pins.
type rig struct {
	d           *gc9a01.Dev
	panel       *gc9a01test.Panel
	dc, rst, bl *gpiotest.Pin
}

func newRig(t testing.TB, o gc9a01.Options) *rig {
	t.Helper()
	r := &rig{dc: &gpiotest.Pin{N: "DC", Num: 25}, rst: &gpiotest.Pin{N: "RST", Num: 27}, bl: &gpiotest.Pin{N: "BL", Num: 18}}
	r.panel = &gc9a01test.Panel{DC: r.dc, Limit: 4096, Log: true}
	o.Sleep = noSleep
	d, err := gc9a01.New(r.panel, r.dc, r.rst, r.bl, o)
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	return r
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	if diff := cmp.Diff(got, string(want)); diff != "" {
		t.Errorf("%s (-got +want)\n%s", name, diff)
	}
}

// pattern is a picture with something different everywhere: a gradient
// in red and green, blue in bands.
func pattern() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, 240, 240))
	for y := range 240 {
		for x := range 240 {
			img.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), uint8((x / 30) * 36), 0xFF})
		}
	}
	return img
}

// TestInitGolden: the reset and init sequence, and the first (black,
// whole) frame, byte for byte and with the DC level of every transfer.
func TestInitGolden(t *testing.T) {
	for _, v := range []gc9a01.Variant{gc9a01.GC9A01, gc9a01.ST7789} {
		t.Run(v.String(), func(t *testing.T) {
			o := gc9a01.Options{Variant: v, Round: v == gc9a01.GC9A01}
			r := newRig(t, o)
			golden(t, "init-"+v.String()+".golden", gc9a01test.Transcript(r.panel.Ops()))
			if !r.panel.On() {
				t.Error("the panel is not on after init")
			}
			if r.rst.Read() != gpio.High || r.bl.Read() != gpio.High {
				t.Errorf("RST %v BL %v after init, want both high", r.rst.Read(), r.bl.Read())
			}
			if r.panel.Hz != gc9a01.DefaultHz || r.panel.Mode != spi.Mode0 {
				t.Errorf("connected at %s %v, want %s mode 0", r.panel.Hz, r.panel.Mode, gc9a01.DefaultHz)
			}
		})
	}
}

// dcPort wraps a port and notes the DC level at every transfer, so a
// playback (which sees bytes only) is checked for its commands too.
type dcPort struct {
	spi.Port
	dc     gpio.PinIn
	levels []bool
}

func (p *dcPort) Connect(f physic.Frequency, m spi.Mode, bits int) (spi.Conn, error) {
	c, err := p.Port.Connect(f, m, bits)
	return &dcConn{Conn: c, p: p}, err
}

type dcConn struct {
	spi.Conn
	p *dcPort
}

func (c *dcConn) Tx(w, r []byte) error {
	c.p.levels = append(c.p.levels, c.p.dc.Read() == gpio.High)
	return c.Conn.Tx(w, r)
}

// TestInitPlayback replays the golden init recording through periph's
// spitest.Playback: every transfer the driver makes must match it byte
// for byte (Playback fails on the first that does not), with the DC level
// the recording gives. The recording's own first frame is cut to 4096
// bytes a transfer, which is also the driver's fallback without limits.
func TestInitPlayback(t *testing.T) {
	b, err := os.ReadFile("testdata/init-st7789.golden")
	if err != nil {
		t.Fatal(err)
	}
	// The ST7789 recording is short enough to be all bytes except the
	// first frame; replay up to that frame's pixels.
	ops, err := parseUntilPixels(string(b))
	if err != nil {
		t.Fatal(err)
	}
	pb := &spitest.Playback{Playback: conntest.Playback{DontPanic: true}}
	var wantDC []bool
	for _, op := range ops {
		pb.Ops = append(pb.Ops, conntest.IO{W: op.W})
		wantDC = append(wantDC, op.Data)
	}
	dc := &gpiotest.Pin{N: "DC"}
	port := &dcPort{Port: &stopAfter{Port: pb, n: len(ops)}, dc: dc}
	_, err = gc9a01.New(port, dc, &gpiotest.Pin{N: "RST"}, nil, gc9a01.Options{Variant: gc9a01.ST7789, Sleep: noSleep})
	if !errors.Is(err, errStop) {
		t.Fatalf("New over the playback: %v", err)
	}
	if err := pb.Close(); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff(port.levels[:len(wantDC)], wantDC); diff != "" {
		t.Errorf("DC levels (-got +want)\n%s", diff)
	}
}

var errStop = errors.New("playback ends here")

// stopAfter fails the transfer after the first n, ending New there.
type stopAfter struct {
	spi.Port
	n int
}

func (s *stopAfter) Connect(f physic.Frequency, m spi.Mode, bits int) (spi.Conn, error) {
	c, err := s.Port.Connect(f, m, bits)
	return &stopConn{Conn: c, s: s}, err
}

type stopConn struct {
	spi.Conn
	s *stopAfter
}

func (c *stopConn) Tx(w, r []byte) error {
	if c.s.n == 0 {
		return errStop
	}
	c.s.n--
	return c.Conn.Tx(w, r)
}

func parseUntilPixels(s string) ([]gc9a01test.Op, error) {
	var full []string
	for _, line := range splitLines(s) {
		if len(line) > 2 && line[2] == 'l' { // "D len=..."
			break
		}
		full = append(full, line)
	}
	joined := ""
	for _, l := range full {
		joined += l + "\n"
	}
	return gc9a01test.ParseTranscript(joined)
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// TestFrameGolden: a whole picture, then a change in a small square, as
// the bytes on the bus (pixel runs by length and hash).
func TestFrameGolden(t *testing.T) {
	r := newRig(t, gc9a01.Options{Round: true})
	r.panel.Ops()
	img := pattern()
	if err := r.d.Show(img); err != nil {
		t.Fatal(err)
	}
	golden(t, "frame-pattern.golden", gc9a01test.Transcript(r.panel.Ops()))
	for y := 100; y < 110; y++ {
		for x := 50; x < 58; x++ {
			img.SetRGBA(x, y, color.RGBA{255, 255, 255, 255})
		}
	}
	if err := r.d.Show(img); err != nil {
		t.Fatal(err)
	}
	golden(t, "frame-dirty.golden", gc9a01test.Transcript(r.panel.Ops()))
}

// TestRecordMatchesPanel records a frame with spitest.Record in front of
// the panel: periph's recording and the panel's log hold the same bytes.
func TestRecordMatchesPanel(t *testing.T) {
	dc := &gpiotest.Pin{N: "DC"}
	panel := &gc9a01test.Panel{DC: dc, Log: true}
	rec := &spitest.Record{Port: panel}
	d, err := gc9a01.New(rec, dc, nil, nil, gc9a01.Options{Round: true, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Fill(color.RGBA{10, 200, 30, 255}); err != nil {
		t.Fatal(err)
	}
	ops := panel.Ops()
	if len(ops) != len(rec.Ops) {
		t.Fatalf("record has %d transfers, panel %d", len(rec.Ops), len(ops))
	}
	for i := range ops {
		if string(ops[i].W) != string(rec.Ops[i].W) {
			t.Fatalf("transfer %d differs", i)
		}
		if len(ops[i].W) > gc9a01.DefaultMaxTx {
			t.Fatalf("transfer %d is %d bytes, over %d", i, len(ops[i].W), gc9a01.DefaultMaxTx)
		}
	}
}

// want is what the glass should show for img: each pixel through RGB565
// and back, black off the glass.
func want(d *gc9a01.Dev, img *image.RGBA) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, 240, 240))
	for y := range 240 {
		for x := range 240 {
			c := color.RGBA{A: 0xFF}
			if d.Visible(x, y) {
				p := img.RGBAAt(x, y)
				v := uint16(p.R>>3)<<11 | uint16(p.G>>2)<<5 | uint16(p.B>>3)
				c = gc9a01.Expand(byte(v>>8), byte(v))
			}
			out.SetRGBA(x, y, c)
		}
	}
	return out
}

func diffImages(t *testing.T, what string, got, want *image.RGBA) {
	t.Helper()
	for y := range 240 {
		for x := range 240 {
			if g, w := got.RGBAAt(x, y), want.RGBAAt(x, y); g != w {
				t.Fatalf("%s: pixel (%d,%d) = %v, want %v", what, x, y, g, w)
			}
		}
	}
}

// TestShowDecodes: what the panel's memory holds after each picture is
// the picture (in RGB565, masked), whatever changed between them, and
// Snapshot tells the same.
func TestShowDecodes(t *testing.T) {
	r := newRig(t, gc9a01.Options{Round: true})
	img := pattern()
	steps := []struct {
		name   string
		change func(img *image.RGBA)
	}{
		{"pattern", func(*image.RGBA) {}},
		{"one pixel", func(img *image.RGBA) { img.SetRGBA(120, 120, color.RGBA{1, 2, 3, 255}) }},
		{"off the glass only", func(img *image.RGBA) { img.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255}) }},
		{"two blocks far apart", func(img *image.RGBA) {
			for i := range 20 {
				img.SetRGBA(30+i, 100, color.RGBA{255, 255, 0, 255})
				img.SetRGBA(200-i, 200, color.RGBA{0, 255, 255, 255})
			}
		}},
		{"everything", func(img *image.RGBA) {
			for i := range img.Pix {
				img.Pix[i] = 255 - img.Pix[i]
			}
		}},
	}
	for _, st := range steps {
		st.change(img)
		if err := r.d.Show(img); err != nil {
			t.Fatal(err)
		}
		w := want(r.d, img)
		diffImages(t, st.name+": panel memory", r.panel.Frame(0, 0, 240, 240), w)
		diffImages(t, st.name+": snapshot", r.d.Snapshot(), w)
	}
}

// TestDirtyRectangles: how many windows and pixels a change costs.
func TestDirtyRectangles(t *testing.T) {
	tests := []struct {
		name              string
		change            func(img *image.RGBA)
		windows           int
		pixels            int64
		maxBytesOfPayload int64
	}{
		{"nothing", func(*image.RGBA) {}, 0, 0, 0},
		{"off the glass", func(img *image.RGBA) { img.SetRGBA(1, 1, color.RGBA{255, 255, 255, 255}) }, 0, 0, 0},
		{"a 20x20 block", func(img *image.RGBA) {
			for y := 100; y < 120; y++ {
				for x := 60; x < 80; x++ {
					img.SetRGBA(x, y, color.RGBA{255, 255, 255, 255})
				}
			}
		}, 1, 400, 800},
		{"two rows 3 apart merge", func(img *image.RGBA) {
			img.SetRGBA(100, 50, color.RGBA{255, 255, 255, 255})
			img.SetRGBA(110, 53, color.RGBA{255, 255, 255, 255})
		}, 1, 11 * 4, 88},
		{"two rows 30 apart stay two", func(img *image.RGBA) {
			img.SetRGBA(100, 50, color.RGBA{255, 255, 255, 255})
			img.SetRGBA(110, 80, color.RGBA{255, 255, 255, 255})
		}, 2, 2, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, gc9a01.Options{Round: true})
			img := pattern()
			if err := r.d.Show(img); err != nil {
				t.Fatal(err)
			}
			before := r.d.Stats()
			tc.change(img)
			if err := r.d.Show(img); err != nil {
				t.Fatal(err)
			}
			after := r.d.Stats()
			if w, p := after.Windows-before.Windows, after.Pixels-before.Pixels; w != tc.windows || p != tc.pixels {
				t.Errorf("windows %d pixels %d, want %d %d", w, p, tc.windows, tc.pixels)
			}
			// Each window costs 3 command bytes and 8 parameter bytes.
			if b := after.Bytes - before.Bytes; b != tc.maxBytesOfPayload+int64(11*tc.windows) {
				t.Errorf("bytes %d, want %d", b, tc.maxBytesOfPayload+int64(11*tc.windows))
			}
			diffImages(t, "panel", r.panel.Frame(0, 0, 240, 240), want(r.d, img))
		})
	}
}

// TestChunking: no transfer exceeds the port's limit, for limits that do
// and do not divide a row.
func TestChunking(t *testing.T) {
	for _, limit := range []int{4096, 1000, 481, 64} {
		dc := &gpiotest.Pin{N: "DC"}
		panel := &gc9a01test.Panel{DC: dc, Limit: limit, Log: true}
		d, err := gc9a01.New(panel, dc, nil, nil, gc9a01.Options{Round: true, Sleep: noSleep})
		if err != nil {
			t.Fatal(err)
		}
		if d.MaxTx() != limit {
			t.Errorf("limit %d: driver uses %d", limit, d.MaxTx())
		}
		img := pattern()
		if err := d.Show(img); err != nil {
			t.Fatal(err)
		}
		for y := 40; y < 200; y++ { // a window narrower than a row
			img.SetRGBA(70+y/4, y, color.RGBA{255, 0, 255, 255})
		}
		if err := d.Show(img); err != nil {
			t.Fatal(err)
		}
		for i, op := range panel.Ops() {
			if len(op.W) > limit {
				t.Fatalf("limit %d: transfer %d is %d bytes", limit, i, len(op.W))
			}
		}
		diffImages(t, "panel", panel.Frame(0, 0, 240, 240), want(d, img))
	}
}

// noPWM is a pin without PWM.
type noPWM struct{ *gpiotest.Pin }

func (noPWM) PWM(gpio.Duty, physic.Frequency) error { return errors.New("no PWM on this pin") }

func TestPowerAndBacklight(t *testing.T) {
	r := newRig(t, gc9a01.Options{Round: true})
	if err := r.d.Fill(color.RGBA{200, 100, 50, 255}); err != nil {
		t.Fatal(err)
	}
	if err := r.d.SetBacklight(50); err != nil {
		t.Fatal(err)
	}
	if r.bl.D != gpio.DutyMax/2 || r.bl.F != gc9a01.BacklightHz || !r.d.BacklightPWM() {
		t.Errorf("backlight PWM %v at %v, want 50%% at %v", r.bl.D, r.bl.F, gc9a01.BacklightHz)
	}
	if got := r.d.Snapshot().RGBAAt(120, 120); got != (color.RGBA{103, 51, 25, 255}) {
		t.Errorf("half backlight pixel = %v", got) // 200,100,50 is 206,101,49 in RGB565, then halved
	}
	if err := r.d.SetPower(false); err != nil {
		t.Fatal(err)
	}
	if r.panel.On() || r.bl.Read() != gpio.Low {
		t.Errorf("asleep: panel on %v, backlight %v", r.panel.On(), r.bl.Read())
	}
	if got := r.d.Snapshot().RGBAAt(120, 120); got != (color.RGBA{0, 0, 0, 255}) {
		t.Errorf("asleep pixel = %v", got)
	}
	if err := r.d.SetPower(true); err != nil {
		t.Fatal(err)
	}
	if !r.panel.On() || r.bl.D != gpio.DutyMax/2 {
		t.Errorf("awake: panel on %v, backlight %v", r.panel.On(), r.bl.D)
	}
	for _, p := range []int{-1, 101} {
		if err := r.d.SetBacklight(p); !errors.Is(err, gc9a01.ErrRange) {
			t.Errorf("backlight %d: %v, want ErrRange", p, err)
		}
	}

	// A pin without PWM: anything above 0 is on.
	bl := noPWM{&gpiotest.Pin{N: "BL"}}
	dc := &gpiotest.Pin{N: "DC"}
	d, err := gc9a01.New(&gc9a01test.Panel{DC: dc}, dc, nil, bl, gc9a01.Options{Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetBacklight(30); err != nil {
		t.Fatal(err)
	}
	if bl.Read() != gpio.High || d.BacklightPWM() {
		t.Errorf("no-PWM pin at 30%%: level %v pwm %v", bl.Read(), d.BacklightPWM())
	}
	if err := d.SetBacklight(0); err != nil || bl.Read() != gpio.Low {
		t.Errorf("no-PWM pin at 0%%: level %v err %v", bl.Read(), err)
	}
}

// TestST7789Offset: a glass placed in the controller's RAM gets its
// windows moved there.
func TestST7789Offset(t *testing.T) {
	r := newRig(t, gc9a01.Options{Variant: gc9a01.ST7789, YOffset: 80})
	img := pattern()
	if err := r.d.Show(img); err != nil {
		t.Fatal(err)
	}
	diffImages(t, "ram at y 80", r.panel.Frame(0, 80, 240, 240), want(r.d, img))
	if r.d.Visible(0, 0) != true {
		t.Error("a square glass masks its corner")
	}
}

// failing fails every transfer after the first n.
type failing struct {
	*gc9a01test.Panel
	n int
}

func (f *failing) Connect(fr physic.Frequency, m spi.Mode, bits int) (spi.Conn, error) {
	c, err := f.Panel.Connect(fr, m, bits)
	return &failConn{Conn: c, f: f}, err
}

type failConn struct {
	spi.Conn
	f *failing
}

func (c *failConn) Tx(w, r []byte) error {
	if c.f.n <= 0 {
		return errors.New("EIO")
	}
	c.f.n--
	return c.Conn.Tx(w, r)
}

func (c *failConn) MaxTxSize() int { return c.Conn.(conn.Limits).MaxTxSize() }

func TestErrors(t *testing.T) {
	r := newRig(t, gc9a01.Options{Round: true})
	for _, img := range []*image.RGBA{nil, image.NewRGBA(image.Rect(0, 0, 10, 10))} {
		if err := r.d.Show(img); !errors.Is(err, gc9a01.ErrSize) {
			t.Errorf("Show(%v): %v, want ErrSize", img, err)
		}
	}
	if _, err := gc9a01.New(r.panel, nil, nil, nil, gc9a01.Options{}); !errors.Is(err, gc9a01.ErrRange) {
		t.Errorf("no DC pin: %v", err)
	}
	if _, err := gc9a01.New(&gc9a01test.Panel{}, r.dc, nil, nil, gc9a01.Options{Hz: 80 * physic.MegaHertz}); !errors.Is(err, gc9a01.ErrRange) {
		t.Errorf("80 MHz: %v", err)
	}

	// A bus error mid-frame: the error says so, and the next frame goes
	// whole, so the glass is right again.
	dc := &gpiotest.Pin{N: "DC"}
	f := &failing{Panel: &gc9a01test.Panel{DC: dc, Limit: 4096}, n: 1 << 30}
	d, err := gc9a01.New(f, dc, nil, nil, gc9a01.Options{Round: true, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	f.n = 10
	img := pattern()
	if err := d.Show(img); !errors.Is(err, gc9a01.ErrBus) {
		t.Fatalf("Show with a failing bus: %v, want ErrBus", err)
	}
	f.n = 1 << 30
	before := d.Stats().Pixels
	img.SetRGBA(120, 120, color.RGBA{9, 9, 9, 255})
	if err := d.Show(img); err != nil {
		t.Fatal(err)
	}
	if got := d.Stats().Pixels - before; got != 240*240 {
		t.Errorf("frame after a bus error sent %d pixels, want the whole %d", got, 240*240)
	}
	diffImages(t, "panel after recovery", f.Frame(0, 0, 240, 240), want(d, img))
}

// FuzzFrames: any two pictures in a row leave the panel's memory holding
// the second (the dirty windows never miss a change).
func FuzzFrames(f *testing.F) {
	f.Add([]byte{0, 0, 10, 10, 255}, []byte{5, 5, 3, 3, 1})
	f.Add([]byte{200, 10, 39, 200, 7}, []byte{})
	r := newRig(f, gc9a01.Options{Round: true})
	r.panel.Log = false
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, spec := range [][]byte{a, b} {
			img := image.NewRGBA(image.Rect(0, 0, 240, 240))
			for i := 0; i+4 < len(spec) && i < 50; i += 5 {
				x0, y0 := int(spec[i])%240, int(spec[i+1])%240
				w, h := int(spec[i+2])%64+1, int(spec[i+3])%64+1
				c := color.RGBA{spec[i+4], spec[i+4] * 3, spec[i+4] * 7, 255}
				for y := y0; y < min(240, y0+h); y++ {
					for x := x0; x < min(240, x0+w); x++ {
						img.SetRGBA(x, y, c)
					}
				}
			}
			if err := r.d.Show(img); err != nil {
				t.Fatal(err)
			}
			diffImages(t, "panel", r.panel.Frame(0, 0, 240, 240), want(r.d, img))
		}
	})
}
