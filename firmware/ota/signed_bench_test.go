package ota

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
)

// BenchmarkSignedUpload uploads a 2 MiB signed image over HTTP (PUT
// /ota/image on a real server on port 0) to a board whose eFuses trust
// its key: streamed into the slot's staging file, checked in one pass,
// its signature verified, committed and staged. It reports the
// throughput as a ratio to the work no upload can skip, measured in the
// same run: SHA-256 of the same bytes plus one ECDSA P-256 verification
// (signed-upload-ratio; target at least 0.8). transport-ratio compares it
// with the bare transport, also measured in the run: the same PUT to a
// handler that only hashes the body as it arrives (1 would mean storing,
// checking and verifying the signature cost nothing beyond that).
func BenchmarkSignedUpload(b *testing.B) {
	key, err := image.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	img, err := image.Sign(testImage(b, "2.0.0", "holo-board", 2<<20-image.SectorSize-1024), key)
	if err != nil {
		b.Fatal(err)
	}
	d, _ := image.DigestOf(&key.PublicKey)
	dir := b.TempDir()
	svc := newSecureBenchEnv(b, dir, d)
	mux := http.NewServeMux()
	for _, r := range svc.Routes() {
		mux.Handle(r.Method+" /api/v1"+r.Path, r.Handler)
	}
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	client := srv.Client()

	im, err := image.Inspect(img)
	if err != nil {
		b.Fatal(err)
	}
	blk := im.Blocks[0]
	r, s := new(big.Int).SetBytes(blk.R[:]), new(big.Int).SetBytes(blk.S[:])
	floor := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		sum := sha256.Sum256(img[:im.Content])
		if !ecdsa.Verify(blk.Key, sum[:], r, s) {
			b.Fatal("signature does not verify")
		}
		floor = min(floor, time.Since(start))
	}
	upload := func() {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/api/v1/ota/image", bytes.NewReader(img))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // so the connection is used again
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("upload: %s", resp.Status)
		}
	}
	upload() // warm the connection and the slot file
	bare := bareTransport(b, img)
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		upload()
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(floor)/float64(per), "signed-upload-ratio")
	b.ReportMetric(float64(bare)/float64(per), "transport-ratio")
	b.ReportMetric(float64(floor.Microseconds()), "floor-us")
}

// bareTransport is the best of 20 PUTs of img to a handler that hashes
// the body in 128 KiB reads and answers {}.
func bareTransport(b *testing.B, img []byte) time.Duration {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		buf := make([]byte, chunkSize)
		if _, err := io.CopyBuffer(h, r.Body, buf); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	best := time.Duration(1<<63 - 1)
	for range 20 {
		start := time.Now()
		resp, err := srv.Client().Post(srv.URL, "application/octet-stream", bytes.NewReader(img))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		best = min(best, time.Since(start))
	}
	return best
}

func newSecureBenchEnv(b *testing.B, dir string, keys ...image.KeyDigest) *Service {
	if err := os.MkdirAll(filepath.Join(dir, "flash"), 0o755); err != nil {
		b.Fatal(err)
	}
	if _, err := efuse.Open(filepath.Join(dir, "flash")).Burn(keys); err != nil {
		b.Fatal(err)
	}
	return newBenchEnvAt(b, dir)
}
