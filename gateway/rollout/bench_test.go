package rollout_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/rollout"
)

// BenchmarkRollout200 rolls a 2 MiB image out to 200 fleet-mode boards,
// 20 in flight, and in the same run sends the same bytes (200 uploads of
// the image, 20 at once) over loopback to a server that only reads them:
// ratio is rollout time over that pure transfer time. heap-MiB is the
// largest heap in use sampled during the rollout (boards and gateway
// share this process; the boards' flash is files).
func BenchmarkRollout200(b *testing.B) {
	const n, inFlight, size = 200, 20, 2 << 20
	bs := startBoards(b, n)
	g := startGateway(b, b.TempDir(), bs.urls, nil)
	g.waitOnline(b, n)
	ctx := context.Background()
	var rolloutTime, transferTime time.Duration
	var peak uint64
	round := 0
	for b.Loop() {
		round++
		a := g.add(b, testImage(b, fmt.Sprintf("%d.0.0", round+1), size))
		// Pure transfer of the same bytes.
		var got atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, _ := io.Copy(io.Discard, r.Body)
			got.Add(k)
		}))
		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, inFlight)
		for range n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				f, _, err := g.arts.Open(a.SHA256)
				if err != nil {
					b.Error(err)
					return
				}
				defer f.Close()
				req, _ := http.NewRequest(http.MethodPut, srv.URL, io.NewSectionReader(f, 0, a.Size))
				req.ContentLength = a.Size
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		transferTime += time.Since(start)
		srv.Close()
		if got.Load() != int64(n)*a.Size {
			b.Fatalf("transfer moved %d bytes", got.Load())
		}

		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			var ms runtime.MemStats
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		})
		start = time.Now()
		st, err := g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, MaxInFlight: inFlight})
		if err != nil {
			b.Fatal(err)
		}
		st = g.waitState(b, st.ID, 10*time.Minute, rollout.StateDone)
		rolloutTime += time.Since(start)
		close(stop)
		sampler.Wait()
		if st.Progress.Phases[rollout.PhaseSucceeded] != n {
			b.Fatalf("progress %+v", st.Progress)
		}
	}
	b.ReportMetric(rolloutTime.Seconds()/float64(round), "rollout-s")
	b.ReportMetric(transferTime.Seconds()/float64(round), "transfer-s")
	b.ReportMetric(rolloutTime.Seconds()/transferTime.Seconds(), "ratio")
	b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(g.eng.BytesSent())/float64(round)/(1<<20), "MiB-sent")
}
