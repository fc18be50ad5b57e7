package ota

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkUploadVerify streams a 16 MiB image through Upload (written to
// the slot file, checked in the same pass, synced, staged) and reports
// its throughput as a ratio to SHA-256 of the same bytes measured in the
// same run (upload-ratio; target at least 0.5).
func BenchmarkUploadVerify(b *testing.B) {
	img := testImage(b, "2.0.0", "holo-board", 16<<20)
	e := newBenchEnvAt(b, b.TempDir())
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		sha256.Sum256(img)
		best = min(best, time.Since(start))
	}
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := e.Upload(SourceUpload, bytes.NewReader(img), int64(len(img)), Options{}, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Discard(); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(best)/float64(per), "upload-ratio")
}

func newBenchEnvAt(b *testing.B, dir string) *Service {
	svc, err := New(Config{DataDir: dir, Running: 0, Expect: HostExpect()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	return svc
}
