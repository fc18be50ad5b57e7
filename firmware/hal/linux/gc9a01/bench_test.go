package gc9a01_test

import (
	"image"
	"image/draw"
	"testing"
	"time"

	"periph.io/x/conn/v3"
	"periph.io/x/conn/v3/gpio/gpiotest"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"

	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01"
	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01/gc9a01test"
	"github.com/holofleet/holofleet/firmware/media"
)

// wirePort is an SPI port that takes transfers and only counts them: the
// driver's own cost is what the benchmark's clock measures, and the
// bytes' time on a 40 MHz wire is computed from the count.
type wirePort struct {
	bytes, txs int64
}

func (w *wirePort) String() string                                            { return "wire" }
func (w *wirePort) Close() error                                              { return nil }
func (w *wirePort) LimitSpeed(physic.Frequency) error                         { return nil }
func (w *wirePort) MaxTxSize() int                                            { return gc9a01.DefaultMaxTx }
func (w *wirePort) Connect(physic.Frequency, spi.Mode, int) (spi.Conn, error) { return w, nil }
func (w *wirePort) Duplex() conn.Duplex                                       { return conn.Half }
func (w *wirePort) TxPackets([]spi.Packet) error                              { return nil }
func (w *wirePort) Tx(b, _ []byte) error {
	w.bytes += int64(len(b))
	w.txs++
	return nil
}

// report turns one run into the figures docs/hardware.md explains:
//
//	cpu-ms/frame    the driver's time per frame on this machine (RGB565
//	                conversion with the mask, the comparison with the
//	                last frame, the copies into transfers, the calls)
//	wire-ms/frame   the frame's bytes at 40 MHz, 8 clocks a byte
//	push-ratio      (cpu + wire) / wire: how long a push takes against
//	                the bytes' wire time, with the driver's work not
//	                overlapping the transfer (spidev's ioctl blocks while
//	                the bytes go out, so it does not); the target is 1.1
//	KiB/frame, tx/frame  bytes and transfers per frame
func report(b *testing.B, w *wirePort, hz physic.Frequency) {
	n := float64(b.N)
	cpu := b.Elapsed().Seconds() / n
	wire := gc9a01test.WireTime(w.bytes, hz).Seconds() / n
	b.ReportMetric(cpu*1e3, "cpu-ms/frame")
	b.ReportMetric(wire*1e3, "wire-ms/frame")
	if wire > 0 {
		b.ReportMetric((cpu+wire)/wire, "push-ratio")
	}
	b.ReportMetric(float64(w.bytes)/n/1024, "KiB/frame")
	b.ReportMetric(float64(w.txs)/n, "tx/frame")
}

func benchDev(b *testing.B) (*gc9a01.Dev, *wirePort) {
	w := &wirePort{}
	dc := &gpiotest.Pin{N: "DC"}
	d, err := gc9a01.New(w, dc, nil, nil, gc9a01.Options{Round: true, Hz: 40 * physic.MegaHertz, Sleep: func(time.Duration) {}})
	if err != nil {
		b.Fatal(err)
	}
	w.bytes, w.txs = 0, 0
	return d, w
}

// BenchmarkFullFrame pushes whole frames: two pictures that differ in
// every pixel on the glass, shown in turn.
func BenchmarkFullFrame(b *testing.B) {
	d, w := benchDev(b)
	a, c := pattern(), pattern()
	for i := range c.Pix {
		if i%4 != 3 {
			c.Pix[i] = ^c.Pix[i]
		}
	}
	frames := []*image.RGBA{a, c}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if err := d.Show(frames[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	report(b, w, 40*physic.MegaHertz)
}

// BenchmarkClipFrame pushes the frames of the project's 240x240, 30 fps
// test clip in order, each against the one before: the dirty windows of
// real footage.
func BenchmarkClipFrame(b *testing.B) {
	clip, err := media.OpenFile("../../../../../shared/media/clip-240-30fps.mov")
	if err != nil {
		b.Skip("test clip not found:", err)
	}
	defer clip.Close()
	var frames []*image.RGBA
	for i := range clip.Frames() {
		f, err := clip.Frame(i)
		if err != nil {
			b.Fatal(err)
		}
		img := image.NewRGBA(image.Rect(0, 0, 240, 240))
		draw.Draw(img, img.Rect, f, f.Bounds().Min, draw.Src)
		frames = append(frames, img)
	}
	d, w := benchDev(b)
	if err := d.Show(frames[len(frames)-1]); err != nil {
		b.Fatal(err)
	}
	w.bytes, w.txs = 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if err := d.Show(frames[i%len(frames)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	report(b, w, 40*physic.MegaHertz)
	b.ReportMetric(float64(d.Stats().Windows)/float64(d.Stats().Frames), "windows/frame")
}
