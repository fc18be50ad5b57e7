package assemble_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
)

// startBoard runs a whole simulated board in this process on loopback.
func startBoard(b *testing.B) (url string, stop func()) {
	b.Helper()
	ready := make(chan struct{})
	bd, err := board.Open(board.Config{DataDir: b.TempDir(), Features: assemble.Features(assemble.Options{}),
		OnReady: func(net.Addr) { close(ready) }})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = bd.Run(ctx, ln); close(done) }()
	<-ready
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }
}

func do(b *testing.B, c *http.Client, method, url, body string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%s %s: %d", method, url, resp.StatusCode)
	}
}

// BenchmarkAPIvsBareHandler measures GET /info and PATCH /leds on a whole
// simulated board over loopback against a bare net/http handler that
// writes a reply of the same size, in the same run. The metric
// speed-ratio is bare time / board time (target: at least 0.5).
func BenchmarkAPIvsBareHandler(b *testing.B) {
	url, stop := startBoard(b)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"get-info", "GET", "/api/v1/info", ""},
		{"patch-leds", "PATCH", "/api/v1/leds", `{"colour":"#102030","brightness":20}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// The bare handler answers with bytes as long as the board's.
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			reply, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(reply)
			}))
			defer bare.Close()
			const rounds = 200
			var ours, theirs time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				for range rounds {
					do(b, client, tc.method, url+tc.path, tc.body)
				}
				mid := time.Now()
				for range rounds {
					do(b, client, tc.method, bare.URL+tc.path, tc.body)
				}
				ours += mid.Sub(start)
				theirs += time.Since(mid)
			}
			b.ReportMetric(float64(theirs)/float64(ours), "speed-ratio")
			b.ReportMetric(float64(ours.Microseconds())/float64(b.N*rounds), "board-µs/req")
		})
	}
}

// BenchmarkPatchToSSE measures PATCH /leds until the leds event reaches
// an SSE client on loopback, one change at a time, and reports p50 and
// p99 in microseconds (target p99 under 5 ms).
func BenchmarkPatchToSSE(b *testing.B) {
	url, stop := startBoard(b)
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/events?kinds=leds", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	client := &http.Client{}
	var lat []time.Duration
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		colour := fmt.Sprintf("#%06x", i&0xffffff)
		start := time.Now()
		do(b, client, "PATCH", url+"/api/v1/leds", `{"colour":"`+colour+`"}`)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, "data:") && strings.Contains(line, colour) {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(p(0.5), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
	b.ReportMetric(p(0.99)/5000, "p99-of-target")
}

// BenchmarkUploadVsDirect measures PUT /fs/file of 4 MiB with its sha256
// over loopback on a whole board against writing and hashing the same
// bytes directly (write, SHA-256, fsync, rename) in the same run. The
// metric upload-ratio is direct time / upload time (target: at least 0.5).
func BenchmarkUploadVsDirect(b *testing.B) {
	url, stop := startBoard(b)
	defer stop()
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	sum := sha256.Sum256(data)
	sumHex := hex.EncodeToString(sum[:])
	dir := b.TempDir()
	client := &http.Client{}
	var up, direct time.Duration
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequest("PUT", url+"/api/v1/fs/file?path=/bench.bin&overwrite=true&sha256="+sumHex, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 201 {
			b.Fatalf("upload: %d", resp.StatusCode)
		}
		mid := time.Now()
		if err := writeAndHash(filepath.Join(dir, "direct.bin"), data, sum); err != nil {
			b.Fatal(err)
		}
		up += mid.Sub(start)
		direct += time.Since(mid)
	}
	b.ReportMetric(float64(direct)/float64(up), "upload-ratio")
}

func writeAndHash(path string, data []byte, want [32]byte) error {
	f, err := os.Create(path + ".part")
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), bytes.NewReader(data)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("hash mismatch")
	}
	return os.Rename(path+".part", path)
}
