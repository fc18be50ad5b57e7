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
// ratio is rollout time over that pure transfer time. A board is in
// flight from its transfer until it is confirmed or failed, so the
// rollout includes 200 restart cycles, 20 at a time.
//
// The breakdown, in the same run: stage-s is a rollout of the same kind
// whose maintenance window is closed, timed until every board holds the
// image staged (transfer and the board's verification, 20 at once; then
// it is aborted), and stage-ratio is that over the pure transfer time.
// xfer-ms, activate-ms and restart-ms are the mean time a board of the
// full rollout spent staging (transfer and verify), from staged to the
// restart request, and from that request to its confirmed new image.
// heap-MiB is the largest heap in use sampled during the rollouts (boards
// and gateway share this process; the boards' flash is files).
func BenchmarkRollout200(b *testing.B) {
	const n, inFlight, size = 200, 20, 2 << 20
	bs := startBoards(b, n)
	g := startGateway(b, b.TempDir(), bs.urls, func(o *rollout.Options) { o.Poll = benchPoll })
	g.waitOnline(b, n)
	ctx := context.Background()
	var rolloutTime, transferTime, stageTime time.Duration
	var xfer, activate, restart time.Duration
	var perBoard int
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
		// Staging only: a window that opens in six hours.
		at := time.Now().UTC()
		closed := &rollout.Window{Start: at.Add(6 * time.Hour).Format("15:04"), End: at.Add(7 * time.Hour).Format("15:04")}
		start = time.Now()
		st, err := g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, MaxInFlight: inFlight, Window: closed})
		if err != nil {
			b.Fatal(err)
		}
		for {
			s, err := g.eng.Get(st.ID)
			if err != nil {
				b.Fatal(err)
			}
			if s.Progress.Phases[rollout.PhaseStaged] == n {
				break
			}
			if s.Progress.Done > 0 || time.Since(start) > 5*time.Minute {
				b.Fatalf("staging: progress %+v", s.Progress)
			}
			time.Sleep(2 * time.Millisecond)
		}
		stageTime += time.Since(start)
		if _, err := g.eng.Abort(ctx, st.ID, "benchmark: staging measured"); err != nil {
			b.Fatal(err)
		}
		g.waitState(b, st.ID, 5*time.Minute, rollout.StateAborted)

		start = time.Now()
		st, err = g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, MaxInFlight: inFlight})
		if err != nil {
			b.Fatal(err)
		}
		st = g.waitState(b, st.ID, 10*time.Minute, rollout.StateDone)
		rolloutTime += time.Since(start)
		if st.Progress.Phases[rollout.PhaseSucceeded] != n {
			b.Fatalf("progress %+v", st.Progress)
		}
		boards, err := g.eng.Boards(st.ID)
		if err != nil {
			b.Fatal(err)
		}
		for _, bd := range boards {
			ts := map[string]time.Time{}
			for _, s := range bd.Timeline {
				if _, ok := ts[s.Phase]; !ok {
					ts[s.Phase] = s.Time
				}
			}
			xfer += ts[rollout.PhaseStaged].Sub(ts[rollout.PhaseStaging])
			activate += ts[rollout.PhaseRestarting].Sub(ts[rollout.PhaseStaged])
			restart += ts[rollout.PhaseSucceeded].Sub(ts[rollout.PhaseRestarting])
			perBoard++
		}
		close(stop)
		sampler.Wait()
	}
	b.ReportMetric(rolloutTime.Seconds()/float64(round), "rollout-s")
	b.ReportMetric(transferTime.Seconds()/float64(round), "transfer-s")
	b.ReportMetric(rolloutTime.Seconds()/transferTime.Seconds(), "ratio")
	b.ReportMetric(stageTime.Seconds()/float64(round), "stage-s")
	b.ReportMetric(stageTime.Seconds()/transferTime.Seconds(), "stage-ratio")
	ms := func(d time.Duration) float64 {
		return float64(d) / float64(time.Millisecond) / float64(max(perBoard, 1))
	}
	b.ReportMetric(ms(xfer), "xfer-ms")
	b.ReportMetric(ms(activate), "activate-ms")
	b.ReportMetric(ms(restart), "restart-ms")
	b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(g.eng.BytesSent())/float64(round)/(1<<20), "MiB-sent")
}

// benchPoll is the engine's Poll in BenchmarkRollout200: how often a
// restarting board is asked GET /ota once its restart delay has passed
// (the harness's 50 ms adds half of it, on average, to every board).
var benchPoll = 10 * time.Millisecond
