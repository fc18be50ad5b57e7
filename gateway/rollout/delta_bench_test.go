package rollout_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// releaseImage packs a 2 MiB host image whose payload looks like code (a
// small alphabet, about 2:1 compressible) and differs from change's
// neighbours in a few hundred bytes and a 4.5 KB insertion: two
// consecutive releases with a small change.
func releaseImage(t testing.TB, version string, change int) []byte {
	t.Helper()
	const size = 2 << 20
	rng := rand.New(rand.NewPCG(5, 6))
	exe := make([]byte, size)
	for i := range exe {
		exe[i] = byte(rng.IntN(16)) * 17
	}
	rc := rand.New(rand.NewPCG(7, uint64(change)))
	for range change * 100 {
		exe[rc.IntN(size)] ^= 0x11
	}
	at := rc.IntN(size)
	exe = append(exe[:at], append(bytes.Repeat([]byte(fmt.Sprintf("change %d ", change)), 500), exe[at:]...)...)
	b, err := image.Pack(image.Desc{Version: version, Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkDeltaRollout200 rolls out one release to the next on 200
// fleet-mode boards (in a child process), 20 in flight, over the capped
// link of BenchmarkRollout200 (100 MiB/s), twice in the same run: with
// whole images (full-s, full-MiB) and with deltas from the release the
// boards run (delta-s, delta-MiB). bytes-ratio is the delta rollout's
// bytes sent over the full one's, time-ratio its time over the full
// one's. Every board runs the same base, so the gateway makes one delta.
func BenchmarkDeltaRollout200(b *testing.B) {
	const n, inFlight, capBPS = 200, 20, 100 << 20
	bs := startBoardProcess(b, n)
	g := startGateway(b, b.TempDir(), bs.urls, func(o *rollout.Options) { o.Poll = benchPoll })
	g.waitOnline(b, n)
	ctx := context.Background()
	run := func(sha string, full bool) (time.Duration, uint64) {
		sent := g.eng.BytesSent()
		start := time.Now()
		st, err := g.eng.Create(ctx, rollout.Plan{Artifact: sha, Target: rollout.Target{All: true}, MaxInFlight: inFlight,
			Bandwidth: capBPS, FullImages: full})
		if err != nil {
			b.Fatal(err)
		}
		st = g.waitState(b, st.ID, 10*time.Minute, rollout.StateDone)
		if st.Progress.Phases[rollout.PhaseSucceeded] != n {
			b.Fatalf("progress %+v", st.Progress)
		}
		return time.Since(start), g.eng.BytesSent() - sent
	}
	var fullT, deltaT time.Duration
	var fullB, deltaB uint64
	round := 0
	for b.Loop() {
		round++
		// base (full, not measured: the boards must run an image the
		// gateway holds), then next (full), then after (delta from next).
		base := g.add(b, releaseImage(b, fmt.Sprintf("%d.0.0", round), 3*round))
		next := g.add(b, releaseImage(b, fmt.Sprintf("%d.0.1", round), 3*round+1))
		after := g.add(b, releaseImage(b, fmt.Sprintf("%d.0.2", round), 3*round+2))
		run(base.SHA256, true)
		t, n := run(next.SHA256, true)
		fullT, fullB = fullT+t, fullB+n
		t, n = run(after.SHA256, false)
		deltaT, deltaB = deltaT+t, deltaB+n
	}
	r := float64(round)
	b.ReportMetric(fullT.Seconds()/r, "full-s")
	b.ReportMetric(deltaT.Seconds()/r, "delta-s")
	b.ReportMetric(float64(fullB)/r/(1<<20), "full-MiB")
	b.ReportMetric(float64(deltaB)/r/(1<<20), "delta-MiB")
	b.ReportMetric(float64(deltaB)/float64(fullB), "bytes-ratio")
	b.ReportMetric(deltaT.Seconds()/fullT.Seconds(), "time-ratio")
}
