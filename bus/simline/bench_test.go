package simline

import (
	"io"
	"testing"
	"time"
)

// benchWire writes n bytes per iteration from one node while another
// drains the line, and reports the measured time over the ideal wire time
// n*10/baud as wire-ratio (1.00 is exact; the design asks for within 5%).
func benchWire(b *testing.B, baud, n int, remote bool) {
	l := newLine(b, Config{Baud: baud})
	var tx io.Writer
	rx := attach(b, l, NodeOptions{})
	if remote {
		path := startHubB(b, l)
		r, err := Dial(b.Context(), path, NodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		tx = r
	} else {
		tx = attach(b, l, NodeOptions{})
	}
	go io.Copy(io.Discard, rx) // ends when the line closes
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var measured time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := tx.Write(buf); err != nil {
			b.Fatal(err)
		}
		measured += time.Since(start)
	}
	ideal := l.WireTime(n) * time.Duration(b.N)
	b.ReportMetric(float64(measured)/float64(ideal), "wire-ratio")
}

func BenchmarkWireTime115200(b *testing.B)    { benchWire(b, 115200, 1024, false) }
func BenchmarkWireTime1M(b *testing.B)        { benchWire(b, 1_000_000, 4096, false) }
func BenchmarkHubWireTime115200(b *testing.B) { benchWire(b, 115200, 1024, true) }
func BenchmarkHubWireTime1M(b *testing.B)     { benchWire(b, 1_000_000, 4096, true) }

// BenchmarkTransmit measures the line's per-byte bookkeeping without wire
// time: collision checks, faults and fan-out to 8 receivers.
func BenchmarkTransmit(b *testing.B) {
	l := newLine(b, Config{Baud: 115200, Faults: Faults{FlipRate: 0.001, DropRate: 0.001, NoiseRate: 0.001}})
	a := attach(b, l, NodeOptions{})
	for range 8 {
		r := attach(b, l, NodeOptions{})
		go io.Copy(io.Discard, r)
	}
	tx := &transmission{node: a, start: l.clk.Now(), end: l.clk.Now()}
	buf := make([]byte, 256)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		l.transmit(tx, buf, 0)
	}
}

func BenchmarkDecodeMsg(b *testing.B) {
	wire := AppendMsg(nil, Msg{Type: MsgRecv, Time: 1, Data: make([]byte, 64)})
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeMsg(wire); err != nil {
			b.Fatal(err)
		}
	}
}
