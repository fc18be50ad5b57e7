package image

import (
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkVerify checks a 16 MiB image in 64 KiB writes and reports its
// throughput as a ratio to SHA-256 of the same bytes measured in the same
// run (verify-ratio; 1 would mean the checks cost nothing beyond the hash).
func BenchmarkVerify(b *testing.B) {
	exe := make([]byte, 16<<20)
	_, _ = rand.Read(exe)
	img, err := Pack(testDesc(), exe)
	if err != nil {
		b.Fatal(err)
	}
	exp := Expect{Chip: ChipHost, Project: "holo-board"}
	hashTime := timeIt(func() { sha256.Sum256(img) })
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		v := NewVerifier(exp)
		for i := 0; i < len(img); i += 64 << 10 {
			if _, err := v.Write(img[i:min(i+64<<10, len(img))]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := v.Finish(); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(hashTime)/float64(per), "verify-ratio")
}

// timeIt returns the best of five runs of f.
func timeIt(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t := time.Now()
		f()
		best = min(best, time.Since(t))
	}
	return best
}
