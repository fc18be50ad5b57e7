package rollout_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// BenchmarkRollout200 rolls a 2 MiB image out to 200 fleet-mode boards,
// 20 in flight, and measures in the same run, on the same boards:
//
//   - transfer-s: the pure transfer of the same bytes over loopback (200
//     uploads of the image, 20 at once, to a server that only reads them);
//   - direct-s: the alternative without the engine, a script that pushes
//     the image straight to every board's PUT /ota/image with activate and
//     reboot, 20 uploads at once, and polls each board's GET /ota until it
//     runs the new image confirmed (no records, no thresholds, no retries);
//   - rollout-s: the engine's rollout of another image of the same size.
//
// ratio is rollout-s over transfer-s (the measure), direct-ratio
// direct-s over transfer-s (what the boards' own work costs on this
// machine), engine-ratio rollout-s over direct-s (what the engine adds).
// The boards run in a child process (the same cores): boards-cpu-s and
// gateway-cpu-s are the CPU time each side used during the rollout. Every
// board receives, verifies and writes the image, checks it again when it
// is activated, and its bootloader checks it once more at the restart:
// three SHA-256 passes over every byte, on this machine's cores.
// boards-floor-ratio is the boards' CPU time spread over every core,
// over transfer-s: no rollout on this machine can beat it. cpu-floor-ratio
// is rollout-s over the CPU time of both sides spread over every core:
// 1 would mean the cores never waited.
//
// The same two, pure transfer and rollout, run again under the plan's
// bandwidth cap of 100 MiB/s (about a gigabit link; the cap's token bucket
// lets one second's worth through at once): capped-ratio is the capped
// rollout over the capped transfer, what the engine costs when the
// network, not this machine's cores, is the limit.
//
// xfer-ms and restart-ms are the mean time a board of the rollout spent
// from staging to the restart request (transfer, verification,
// activation) and from there to its confirmed new image. heap-MiB and
// rss-MiB are the gateway's largest heap in use and resident set sampled
// during the rollout (heap-idle-MiB: before it, the same 200 boards
// online).
//
// Every rollout here sends whole images (FullImages): the boards run an
// image the gateway holds, and deltas would change what is measured;
// BenchmarkDeltaRollout200 compares the two.
func BenchmarkRollout200(b *testing.B) {
	const n, inFlight, size, capBPS = 200, 20, 2 << 20, 100 << 20
	bs := startBoardProcess(b, n)
	g := startGateway(b, b.TempDir(), bs.urls, func(o *rollout.Options) { o.Poll = benchPoll })
	g.waitOnline(b, n)
	ctx := context.Background()
	var transfer, direct, roll, xfer, restart, cappedTransfer, capped time.Duration
	var boardsCPU, gatewayCPU time.Duration
	var perBoard int
	var peakHeap, peakRSS, idleHeap uint64
	round := 0
	for b.Loop() {
		round++
		first := g.add(b, testImage(b, fmt.Sprintf("%d.0.0", round), size))
		second := g.add(b, testImage(b, fmt.Sprintf("%d.0.1", round), size))
		third := g.add(b, testImage(b, fmt.Sprintf("%d.0.2", round), size))

		transfer += pureTransfer(b, g.arts, first, n, inFlight, nil)
		direct += directUpdate(b, g.arts, first, bs.urls, inFlight)

		runtime.GC()
		idleHeap = max(idleHeap, heapInUse())
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				peakHeap = max(peakHeap, heapInUse())
				peakRSS = max(peakRSS, rss())
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		})
		cpu0, child0 := selfCPU(), childCPU(bs.pid)
		start := time.Now()
		st, err := g.eng.Create(ctx, rollout.Plan{Artifact: second.SHA256, Target: rollout.Target{All: true}, MaxInFlight: inFlight, FullImages: true})
		if err != nil {
			b.Fatal(err)
		}
		st = g.waitState(b, st.ID, 10*time.Minute, rollout.StateDone)
		roll += time.Since(start)
		gatewayCPU += selfCPU() - cpu0
		boardsCPU += childCPU(bs.pid) - child0
		close(stop)
		sampler.Wait()
		if st.Progress.Phases[rollout.PhaseSucceeded] != n {
			b.Fatalf("progress %+v", st.Progress)
		}
		boards, err := g.eng.Boards(st.ID)
		if err != nil {
			b.Fatal(err)
		}

		cappedTransfer += pureTransfer(b, g.arts, first, n, inFlight, rollout.NewLimiter(capBPS))
		start = time.Now()
		cst, err := g.eng.Create(ctx, rollout.Plan{Artifact: third.SHA256, Target: rollout.Target{All: true}, MaxInFlight: inFlight, Bandwidth: capBPS, FullImages: true})
		if err != nil {
			b.Fatal(err)
		}
		cst = g.waitState(b, cst.ID, 10*time.Minute, rollout.StateDone)
		capped += time.Since(start)
		if cst.Progress.Phases[rollout.PhaseSucceeded] != n {
			b.Fatalf("capped: progress %+v", cst.Progress)
		}
		for _, bd := range boards {
			ts := map[string]time.Time{}
			for _, s := range bd.Timeline {
				if _, ok := ts[s.Phase]; !ok {
					ts[s.Phase] = s.Time
				}
			}
			xfer += ts[rollout.PhaseRestarting].Sub(ts[rollout.PhaseStaging])
			restart += ts[rollout.PhaseSucceeded].Sub(ts[rollout.PhaseRestarting])
			perBoard++
		}
	}
	s := func(d time.Duration) float64 { return d.Seconds() / float64(round) }
	ms := func(d time.Duration) float64 {
		return float64(d) / float64(time.Millisecond) / float64(max(perBoard, 1))
	}
	b.ReportMetric(s(roll), "rollout-s")
	b.ReportMetric(s(transfer), "transfer-s")
	b.ReportMetric(s(direct), "direct-s")
	b.ReportMetric(roll.Seconds()/transfer.Seconds(), "ratio")
	b.ReportMetric(direct.Seconds()/transfer.Seconds(), "direct-ratio")
	b.ReportMetric(roll.Seconds()/direct.Seconds(), "engine-ratio")
	b.ReportMetric(s(cappedTransfer), "capped-transfer-s")
	b.ReportMetric(s(capped), "capped-rollout-s")
	b.ReportMetric(capped.Seconds()/cappedTransfer.Seconds(), "capped-ratio")
	b.ReportMetric(s(boardsCPU), "boards-cpu-s")
	b.ReportMetric(s(gatewayCPU), "gateway-cpu-s")
	cores := float64(runtime.GOMAXPROCS(0))
	b.ReportMetric(boardsCPU.Seconds()/cores/transfer.Seconds(), "boards-floor-ratio")
	b.ReportMetric(roll.Seconds()/((boardsCPU+gatewayCPU).Seconds()/cores), "cpu-floor-ratio")
	b.ReportMetric(ms(xfer), "xfer-ms")
	b.ReportMetric(ms(restart), "restart-ms")
	b.ReportMetric(float64(idleHeap)/(1<<20), "heap-idle-MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(peakRSS)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(g.eng.BytesSent())/float64(round)/(1<<20), "MiB-sent")
}

// benchPoll is the engine's Poll in BenchmarkRollout200, and the direct
// script's: how often a restarting board is asked GET /ota once its
// restart delay has passed.
var benchPoll = 10 * time.Millisecond

// boardRestartDelay is how long a board waits after an update before it
// restarts (firmware/ota's UpdateRestartDelay); polling starts after it.
const boardRestartDelay = 200 * time.Millisecond

// pureTransfer sends a's bytes n times, inFlight at once, over loopback
// to a server that only reads them, through lim when it is not nil.
func pureTransfer(b *testing.B, arts *artifact.Store, a artifact.Artifact, n, inFlight int, lim *rollout.Limiter) time.Duration {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := io.Copy(io.Discard, r.Body)
		got.Add(k)
	}))
	defer srv.Close()
	start := time.Now()
	each(n, inFlight, func(int) {
		f, _, err := arts.Open(a.SHA256)
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		var body io.Reader = io.NewSectionReader(f, 0, a.Size)
		if lim != nil {
			body = lim.Reader(context.Background(), body)
		}
		req, _ := http.NewRequest(http.MethodPut, srv.URL, body)
		req.ContentLength = a.Size
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		resp.Body.Close()
	})
	d := time.Since(start)
	if got.Load() != int64(n)*a.Size {
		b.Fatalf("transfer moved %d bytes", got.Load())
	}
	return d
}

// directUpdate is the alternative to a rollout: push a to every board
// with activate and reboot, inFlight uploads at once, then poll each
// board until it runs a confirmed. It returns when every board does.
func directUpdate(b *testing.B, arts *artifact.Store, a artifact.Artifact, urls []string, inFlight int) time.Duration {
	var confirmed sync.WaitGroup
	start := time.Now()
	each(len(urls), inFlight, func(i int) {
		f, _, err := arts.Open(a.SHA256)
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		req, _ := http.NewRequest(http.MethodPut, urls[i]+"/api/v1/ota/image?activate=1&reboot=1&sha256="+a.SHA256, io.NewSectionReader(f, 0, a.Size))
		req.ContentLength = a.Size
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("board %d: upload %d", i, resp.StatusCode)
			return
		}
		confirmed.Go(func() {
			time.Sleep(boardRestartDelay)
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(benchPoll) {
				body, err := httpGet(urls[i] + "/api/v1/ota")
				var st boardapi.OTAStatus
				if err != nil || json.Unmarshal(body, &st) != nil {
					continue
				}
				for _, s := range st.Slots {
					if s.Running && s.App != nil && s.App.Version == a.App.Version && s.State != nil && *s.State == "confirmed" {
						return
					}
				}
			}
			b.Errorf("board %d never ran %s confirmed", i, a.App.Version)
		})
	})
	confirmed.Wait()
	return time.Since(start)
}

// each runs f(0..n-1), at most k at once.
func each(n, k int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, k)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rss is this process's resident set in bytes (0 where /proc is missing).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is process pid's user and system CPU time (from /proc, in
// clock ticks of 10 ms).
func childCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// boardProcess is a fleet-mode installation in a child process: this test
// binary started again with boardsEnv set.
type boardProcess struct {
	pid  int
	urls []string
}

const boardsEnv = "HOLO_ROLLOUT_BENCH_BOARDS"

func startBoardProcess(t testing.TB, n int) *boardProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), boardsEnv+"="+strconv.Itoa(n), "HOLO_ROLLOUT_BENCH_DIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close() // the child stops its boards when its stdin ends
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatalf("board process: %v", err)
	}
	bp := &boardProcess{pid: cmd.Process.Pid}
	if err := json.Unmarshal(line, &bp.urls); err != nil || len(bp.urls) != n {
		t.Fatalf("board process said %q", line)
	}
	return bp
}

// boardChild is the child's side: start the boards, print their URLs as
// one JSON line, run until stdin ends.
func boardChild(n string) int {
	k, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: k, BaseDir: os.Getenv("HOLO_ROLLOUT_BENCH_DIR"), Parallel: 16, OTA: &fleetmode.OTAOptions{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if path := os.Getenv("HOLO_ROLLOUT_BENCH_CPUPROFILE"); path != "" {
		// The boards' side of the benchmark, profiled.
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	var urls []string
	for _, in := range fm.Boards() {
		urls = append(urls, in.URL)
	}
	line, _ := json.Marshal(urls)
	fmt.Printf("%s\n", line)
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = fm.Stop()
	return 0
}

func TestMain(m *testing.M) {
	if n := os.Getenv(boardsEnv); n != "" {
		os.Exit(boardChild(n))
	}
	os.Exit(m.Run())
}
