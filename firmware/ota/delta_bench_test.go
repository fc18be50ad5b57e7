package ota

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/imagedelta"
	"github.com/holofleet/holofleet/firmware/ota/bootloader"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// BenchmarkDeltaRebuild: the board's time and memory to rebuild a 2 MiB
// image from a delta (PUT /ota/image?base=) against receiving the whole
// image (PUT /ota/image), both through the same checks into the free
// slot. Reported per operation: full-ms and delta-ms (time-ratio, delta
// over full, in the same run), full-alloc-MiB and delta-alloc-MiB (bytes
// allocated during the operation: the delta holds the running image and
// the zstd window), full-peak-MiB and delta-peak-MiB (the most heap in
// use above the level before, sampled while it runs; the highest over the
// iterations), delta-KiB (the delta's size).
func BenchmarkDeltaRebuild(b *testing.B) {
	const size = 2 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	exe := make([]byte, size)
	for i := range exe {
		// Code-like bytes: a small alphabet, compressible about 2:1.
		exe[i] = byte(rng.IntN(16)) * 17
	}
	pack := func(v string, e []byte) []byte {
		img, err := image.Pack(image.Desc{Version: v, Project: "holo-board", Date: "Jan  1 2026", Time: "00:00:00", IDF: "bench"}, e)
		if err != nil {
			b.Fatal(err)
		}
		return img
	}
	base := pack("1.0.0", exe)
	next := bytes.Clone(exe[:size/2])
	next = append(next, bytes.Repeat([]byte("new code "), 500)...)
	next = append(next, exe[size/2:]...)
	for range 200 {
		next[rng.IntN(len(next))] ^= 0x11
	}
	target := pack("1.0.1", next)
	delta, err := imagedelta.Make(base, target)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	fl, err := flash.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bootloader.Choose(bootloader.Config{Flash: fl, Expect: HostExpect(), Install: func() ([]byte, error) { return base, nil }}); err != nil {
		b.Fatal(err)
	}
	svc := newBenchEnvAt(b, dir)
	baseSHA := svc.RunningSHA256()
	// measure runs f and returns its time, the bytes it allocated and its
	// peak: the most heap in use above the level before it, sampled every
	// 200 µs while it runs (the board's RAM high-water mark for it).
	measure := func(f func() error) (time.Duration, uint64, uint64) {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		stop := make(chan struct{})
		peak := make(chan uint64, 1)
		go func() {
			var top uint64
			tk := time.NewTicker(200 * time.Microsecond)
			defer tk.Stop()
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				top = max(top, ms.HeapInuse)
				select {
				case <-stop:
					peak <- top
					return
				case <-tk.C:
				}
			}
		}()
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		close(stop)
		top := <-peak
		runtime.ReadMemStats(&m1)
		if _, err := svc.Discard(); err != nil {
			b.Fatal(err)
		}
		return d, m1.TotalAlloc - m0.TotalAlloc, top - min(top, m0.HeapInuse)
	}
	var fullT, deltaT time.Duration
	var fullA, deltaA, fullP, deltaP uint64
	for b.Loop() {
		t, a, p := measure(func() error {
			_, err := svc.Upload(SourceUpload, bytes.NewReader(target), int64(len(target)), Options{}, nil)
			return err
		})
		fullT, fullA, fullP = fullT+t, fullA+a, max(fullP, p)
		t, a, p = measure(func() error {
			_, err := svc.UploadDelta(SourceUpload, bytes.NewReader(delta), int64(len(delta)), baseSHA, Options{}, nil)
			return err
		})
		deltaT, deltaA, deltaP = deltaT+t, deltaA+a, max(deltaP, p)
	}
	n := float64(b.N)
	b.ReportMetric(float64(fullT.Milliseconds())/n, "full-ms")
	b.ReportMetric(float64(deltaT.Milliseconds())/n, "delta-ms")
	b.ReportMetric(float64(fullA)/n/(1<<20), "full-alloc-MiB")
	b.ReportMetric(float64(deltaA)/n/(1<<20), "delta-alloc-MiB")
	b.ReportMetric(float64(fullP)/(1<<20), "full-peak-MiB")
	b.ReportMetric(float64(deltaP)/(1<<20), "delta-peak-MiB")
	b.ReportMetric(deltaT.Seconds()/fullT.Seconds(), "time-ratio")
	b.ReportMetric(float64(len(delta))/1024, "delta-KiB")
	b.ReportMetric(float64(len(target))/1024, "image-KiB")
}
