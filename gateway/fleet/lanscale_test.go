//go:build linux

package fleet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/registry"
	"github.com/holofleet/holofleet/store"
)

// The scale checks of one gateway over many LAN boards run the boards in
// child processes (this test binary again, started with boardsEnv set), so
// that everything the gateway process holds and spends is the gateway's
// own: its heap, its goroutine stacks, its resident memory and its CPU time
// are read in this process and nothing of the boards is in them. The
// boards run in several children (boardsPerProcess each) because a board
// holds several files open (its listener, its stores, its side of each
// connection) and one process may open only so many: each process raises
// its soft limit to what it needs, up to the hard limit, and says so when
// that is too low.

// Environment of a board process.
const (
	boardsEnv    = "HOLOFLEET_TEST_BOARDS"     // how many boards to run
	boardsDirEnv = "HOLOFLEET_TEST_BOARDS_DIR" // their data directory
)

// Open files: a fleet-mode board holds up to filesPerBoard (its listener,
// its stores, its side of the stream and of the calls at its start-up),
// a board process filesSpare more; the gateway one stream per board and
// filesSpare more (idle call connections, clock rounds, its store).
const (
	filesPerBoard = 6
	filesSpare    = 256
	// maxPerProcess bounds the boards of one process.
	maxPerProcess = 2500
)

// boardsPerProcess is how many boards one child runs: maxPerProcess, or
// fewer when the hard open-files limit (which children inherit) is lower
// than they would need.
func boardsPerProcess() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return maxPerProcess
	}
	return max(1, min(maxPerProcess, (int(min(lim.Max, 1<<30))-filesSpare)/filesPerBoard))
}

// TestMain runs the test binary as a board process when boardsEnv is set.
func TestMain(m *testing.M) {
	if s := os.Getenv(boardsEnv); s != "" {
		os.Exit(boardsProcess(s, os.Getenv(boardsDirEnv)))
	}
	os.Exit(m.Run())
}

// boardsProcess runs count fleet-mode boards in dir. It writes each
// board's base URL on a line of its standard output, then "ready"; then it
// answers each line "cpu" read from its standard input with its CPU time
// so far in nanoseconds, and stops the boards when its input ends (the
// parent closed it or died).
func boardsProcess(count, dir string) int {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || dir == "" {
		fmt.Fprintf(os.Stderr, "boards process: %s=%q %s=%q\n", boardsEnv, count, boardsDirEnv, dir)
		return 2
	}
	if lim, err := raiseNoFile(2 * (filesPerBoard*n + filesSpare)); err != nil || lim < uint64(filesPerBoard*n+filesSpare) {
		fmt.Fprintf(os.Stderr, "boards process: open files limited to %d (%v); %d boards need about %d\n",
			lim, err, n, filesPerBoard*n+filesSpare)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fm, err := fleetmode.Start(ctx, fleetmode.Options{N: n, BaseDir: dir, Parallel: 2 * runtime.GOMAXPROCS(0)})
	if err != nil {
		fmt.Fprintf(os.Stderr, "boards process: %v\n", err)
		return 1
	}
	defer fm.Stop()
	out := bufio.NewWriter(os.Stdout)
	for _, in := range fm.Boards() {
		fmt.Fprintln(out, in.URL)
	}
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "cpu" {
			fmt.Fprintln(out, int64(cpuTime()))
			if err := out.Flush(); err != nil {
				return 1
			}
		}
	}
	return 0
}

// boardProcs are the running board processes.
type boardProcs struct {
	procs []*boardProc
	urls  []string
}

type boardProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startBoards starts n boards in processes of at most perProc boards each
// and returns once every one serves.
func startBoards(tb testing.TB, n, perProc int, dir string) *boardProcs {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	bp := &boardProcs{}
	tb.Cleanup(bp.stop)
	for i := 0; i < n; i += perProc {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", boardsEnv, min(perProc, n-i)),
			boardsDirEnv+"="+filepath.Join(dir, fmt.Sprintf("proc-%d", i/perProc)))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			tb.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		bp.procs = append(bp.procs, &boardProc{cmd: cmd, in: in, out: sc})
	}
	urls := make([][]string, len(bp.procs))
	errs := make([]error, len(bp.procs))
	var wg sync.WaitGroup
	for i, p := range bp.procs {
		wg.Go(func() {
			for p.out.Scan() {
				if line := p.out.Text(); line != "ready" {
					urls[i] = append(urls[i], line)
					continue
				}
				return
			}
			errs[i] = fmt.Errorf("board process %d ended before it was ready: %v", i, p.out.Err())
		})
	}
	wg.Wait()
	for i := range bp.procs {
		if errs[i] != nil {
			tb.Fatal(errs[i])
		}
		bp.urls = append(bp.urls, urls[i]...)
	}
	if len(bp.urls) != n {
		tb.Fatalf("%d boards started, want %d", len(bp.urls), n)
	}
	return bp
}

// cpu is the board processes' CPU time so far.
func (bp *boardProcs) cpu() (time.Duration, error) {
	var sum time.Duration
	for _, p := range bp.procs {
		if _, err := io.WriteString(p.in, "cpu\n"); err != nil {
			return 0, err
		}
		if !p.out.Scan() {
			return 0, fmt.Errorf("board process: %v", p.out.Err())
		}
		ns, err := strconv.ParseInt(p.out.Text(), 10, 64)
		if err != nil {
			return 0, err
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// stop ends the board processes: their input closes, they stop their
// boards and exit (killed after 30 s).
func (bp *boardProcs) stop() {
	for _, p := range bp.procs {
		p.in.Close()
	}
	for _, p := range bp.procs {
		t := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() })
		_ = p.cmd.Wait()
		t.Stop()
	}
	bp.procs = nil
}

// raiseNoFile lifts the soft open-files limit towards want (up to the
// hard limit) and returns the limit now in force.
func raiseNoFile(want int) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= uint64(want) {
		return lim.Cur, nil
	}
	lim.Cur = min(uint64(want), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

// gatewayMem is what the gateway process holds: Go heap in use plus
// goroutine stacks (after two collections), and resident memory (after
// the runtime returned what it could to the system).
type gatewayMem struct {
	heapStacks, stacks, rss int64
}

func readGatewayMem(tb testing.TB) gatewayMem {
	time.Sleep(500 * time.Millisecond)
	m := gatewayMem{heapStacks: memInUse()}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.stacks = int64(ms.StackInuse)
	debug.FreeOSMemory()
	m.rss = rss(tb)
	return m
}

// rss is the process's resident set size (VmRSS), in bytes.
func rss(tb testing.TB) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// gateway is a gateway core (bbolt registry, LAN driver) following boards.
type gateway struct {
	f    *fleet.Fleet
	lan  *lan.LAN
	stop func()
}

func startGateway(tb testing.TB, urls []string, dir string, lo lan.Options) *gateway {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dir, "gateway.db"))
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := registry.Open(db)
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	ld := lan.New(lo)
	for _, u := range urls {
		if err := ld.Add(u, ""); err != nil {
			tb.Fatal(err)
		}
	}
	f := fleet.New(fleet.Options{Registry: reg, Drivers: []fleet.Driver{ld}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	g := &gateway{f: f, lan: ld}
	var once sync.Once
	g.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			db.Close()
		})
	}
	tb.Cleanup(g.stop)
	return g
}

// waitOnline waits until n boards are online, each with a clock estimate.
func (g *gateway) waitOnline(tb testing.TB, n int, d time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		st := g.f.Stats()
		if st.Online >= n {
			clocked := 0
			for _, v := range g.f.Boards(fleet.Filter{}) {
				if v.Clock != nil {
					clocked++
				}
			}
			if clocked >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %d of %d boards online", d, st.Online, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// idleCPUOf is what cpu() spent over d, in seconds of CPU per second.
func idleCPUOf(tb testing.TB, d time.Duration, cpu func() (time.Duration, error)) float64 {
	before, err := cpu()
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(d)
	after, err := cpu()
	if err != nil {
		tb.Fatal(err)
	}
	return float64(after-before) / float64(time.Since(t0))
}

// MemTargetPerBoard is the gateway's memory budget for one idle LAN board.
const memTargetPerBoard = 100 << 10

// BenchmarkLAN10000 is the scale check of one gateway: FLEET_LAN_BOARDS
// (default 10,000) fleet-mode boards in child processes, and a gateway core
// in this process following all of them over the LAN. Once every board is
// online with a clock estimate, and FLEET_LAN_SETTLE (default 10 s: the
// boards' clock estimates settle) more have passed, it reports per board,
// at idle, of the gateway process only:
//
//	gateway-B/board         Go heap in use + goroutine stacks it added
//	gateway-rss-B/board     resident memory it added
//	mem-target-ratio        the larger of the two against 100 KB
//	goroutines/board        goroutines it added
//	cpu-us/board/s          its CPU time over an idle window of
//	                        FLEET_LAN_IDLE (default 30 s, the longest
//	                        period of the clock rounds, so each board's
//	                        steady round is in it), in microseconds per
//	                        board per second
//	boards-cpu-us/board/s   the same of the board processes (for scale)
//	clock-uncertainty-p90-us the boards' clock estimates after the window:
//	clock-age-max-s         the 90th percentile of their uncertainty, and
//	                        the longest since one was measured
//
// FLEET_LAN_PROFILE=dir writes the gateway's heap and goroutine profiles
// there at the measuring point, and its CPU profile over the idle window.
func BenchmarkLAN10000(b *testing.B) {
	n := envInt(b, "FLEET_LAN_BOARDS", 10000)
	settleFor := envDuration(b, "FLEET_LAN_SETTLE", 10*time.Second)
	idle := envDuration(b, "FLEET_LAN_IDLE", lan.DefaultClockMaxEvery)
	if lim, err := raiseNoFile(2 * (n + filesSpare)); err != nil || lim < uint64(n+filesSpare) {
		b.Fatalf("open files limited to %d (%v): the gateway holds one stream per board and needs about %d; raise the hard limit (ulimit -Hn)",
			lim, err, n+filesSpare)
	}
	for b.Loop() { // once: ns/op is the whole scenario
		lanScale(b, n, settleFor, idle)
	}
}

func lanScale(b *testing.B, n int, settleFor, idle time.Duration) {
	dir := b.TempDir()
	t0 := time.Now()
	bp := startBoards(b, n, boardsPerProcess(), filepath.Join(dir, "boards"))
	b.Logf("%d boards started in %d processes in %v", n, len(bp.procs), time.Since(t0).Round(time.Millisecond))

	settle()
	base, goBase := readGatewayMem(b), runtime.NumGoroutine()
	lo := lan.Options{}
	if os.Getenv("FLEET_LAN_CLOCK") == "off" {
		lo.ClockEvery = -1
	}
	t0 = time.Now()
	g := startGateway(b, bp.urls, filepath.Join(dir, "gateway"), lo)
	if lo.ClockEvery < 0 {
		for t := time.Now(); g.f.Stats().Online < n; time.Sleep(200 * time.Millisecond) {
			if time.Since(t) > 10*time.Minute {
				b.Fatalf("%d of %d online", g.f.Stats().Online, n)
			}
		}
	} else {
		g.waitOnline(b, n, 10*time.Minute)
	}
	b.Logf("%d boards online in the fleet in %v", n, time.Since(t0).Round(time.Millisecond))
	time.Sleep(settleFor)
	settle()
	all, goAll := readGatewayMem(b), runtime.NumGoroutine()
	profDir := os.Getenv("FLEET_LAN_PROFILE")
	if profDir != "" {
		writeProfiles(b, profDir)
		stop := startCPUProfile(b, profDir)
		defer stop()
	}
	cpu := idleCPUOf(b, idle, func() (time.Duration, error) { return cpuTime(), nil })
	boardsCPU := idleCPUOf(b, min(idle, 5*time.Second), bp.cpu)
	if st := g.f.Stats(); st.Online != n {
		b.Errorf("after idling: %d of %d online", st.Online, n)
	}
	cq := clockQuality(g.f.Boards(fleet.Filter{}), time.Now())

	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.Logf("per board: heap %.0f B, stacks %.0f B, resident %.0f B, %.2f goroutines; CPU at idle %.1f µs/s (boards %.1f µs/s)",
		per(all.heapStacks-all.stacks-base.heapStacks+base.stacks), per(all.stacks-base.stacks), per(all.rss-base.rss),
		per(int64(goAll-goBase)), 1e6*cpu/float64(n), 1e6*boardsCPU/float64(n))
	b.ReportMetric(per(all.heapStacks-base.heapStacks), "gateway-B/board")
	b.ReportMetric(per(all.rss-base.rss), "gateway-rss-B/board")
	b.ReportMetric(per(max(all.heapStacks-base.heapStacks, all.rss-base.rss))/memTargetPerBoard, "mem-target-ratio")
	b.ReportMetric(per(int64(goAll-goBase)), "goroutines/board")
	b.ReportMetric(1e6*cpu/float64(n), "cpu-us/board/s")
	b.ReportMetric(1e6*boardsCPU/float64(n), "boards-cpu-us/board/s")
	b.Logf("clocks: %d of %d boards; uncertainty p50 %d µs, p90 %d µs, max %d µs; measured p50 %v, max %v ago",
		cq.n, n, cq.uncP50, cq.uncP90, cq.uncMax, cq.ageP50.Round(time.Millisecond), cq.ageMax.Round(time.Millisecond))
	b.ReportMetric(float64(cq.uncP90), "clock-uncertainty-p90-us")
	b.ReportMetric(cq.ageMax.Seconds(), "clock-age-max-s")
}

// clocks sums up the boards' clock estimates at now: their uncertainty
// and how long ago they were measured.
type clocks struct {
	n                      int
	uncP50, uncP90, uncMax int64
	ageP50, ageMax         time.Duration
}

func clockQuality(views []fleet.BoardView, now time.Time) clocks {
	var unc []int64
	var age []time.Duration
	for _, v := range views {
		if v.Clock != nil {
			unc = append(unc, v.Clock.UncertaintyUS)
			age = append(age, now.Sub(v.Clock.SyncedAt))
		}
	}
	if len(unc) == 0 {
		return clocks{}
	}
	slices.Sort(unc)
	slices.Sort(age)
	return clocks{n: len(unc), uncP50: unc[len(unc)/2], uncP90: unc[len(unc)*9/10], uncMax: unc[len(unc)-1],
		ageP50: age[len(age)/2], ageMax: age[len(age)-1]}
}

// writeProfiles writes the heap and goroutine profiles into dir.
func writeProfiles(tb testing.TB, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			tb.Fatal(err)
		}
		if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
}

// startCPUProfile profiles the CPU into dir/cpu.pprof until stop.
func startCPUProfile(tb testing.TB, dir string) (stop func()) {
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		tb.Fatalf("%s=%q: want a duration", name, s)
	}
	return d
}

// TestLANMemoryPerBoard is the quick form of BenchmarkLAN10000: 200 boards
// in a child process, and the gateway following them holds under 100 KB
// of Go heap and goroutine stacks per board once idle (the resident size
// is logged, not checked: under the race detector it holds the detector's
// shadow memory). At this size the gateway's fixed costs (the idle call
// connections net/http keeps, up to 100) weigh more per board than at
// 10,000.
func TestLANMemoryPerBoard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 200 boards")
	}
	const n = 200
	dir := t.TempDir()
	bp := startBoards(t, n, n, filepath.Join(dir, "boards"))
	settle()
	base, goBase := readGatewayMem(t), runtime.NumGoroutine()
	g := startGateway(t, bp.urls, filepath.Join(dir, "gateway"), lan.Options{})
	g.waitOnline(t, n, 2*time.Minute)
	settle()
	all, goAll := readGatewayMem(t), runtime.NumGoroutine()
	per := (all.heapStacks - base.heapStacks) / n
	t.Logf("per board: heap+stacks %d B (stacks %d B), resident %d B, %.2f goroutines",
		per, (all.stacks-base.stacks)/n, (all.rss-base.rss)/n, float64(goAll-goBase)/n)
	if per > memTargetPerBoard {
		t.Errorf("the gateway holds %d B per idle board, over %d", per, memTargetPerBoard)
	}
}
