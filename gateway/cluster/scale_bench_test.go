//go:build linux

package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/store"
)

// The cluster's scale benchmark: three holo-gateway processes on one
// engine (a nats-server process), each following its own fleet-mode LAN
// boards, which run in board processes (this test binary again, started
// with scaleBoardsEnv set). Every process is its own, so each one's
// resident memory and CPU time, read from /proc, are its own: the
// engine's, each gateway's, the boards'.

// Environment of a board process of the scale benchmark.
const (
	// scaleBoardsEnv is "N FIRST EVERY": run N boards, numbered FIRST to
	// FIRST+N-1 in the installation; board number k is in group 1 when
	// k%EVERY == 0.
	scaleBoardsEnv = "HOLOFLEET_CLUSTER_SCALE_BOARDS"
	scaleDirEnv    = "HOLOFLEET_CLUSTER_SCALE_DIR" // the boards' data directory
)

// Open files of a board process: a fleet-mode board holds up to
// scaleFilesPerBoard (listener, stores, its side of the gateway's stream
// and start-up calls), a process scaleFilesSpare more.
const (
	scaleFilesPerBoard = 6
	scaleFilesSpare    = 256
	scaleMaxPerProcess = 2500
)

func init() {
	childMains[scaleBoardsEnv] = func(v string) int { return scaleBoardsProcess(v, os.Getenv(scaleDirEnv)) }
}

// scaleBoardsProcess runs the boards scaleBoardsEnv names in dir. It
// writes a line "URL ID G" per board (G: 1 for a member of group 1, else
// 0), then "ready"; then it answers each "usage" read from its standard
// input with "RSS-BYTES CPU-NS" of its own, and stops its boards when its
// input ends.
func scaleBoardsProcess(spec, dir string) int {
	var n, first, every int
	if _, err := fmt.Sscanf(spec, "%d %d %d", &n, &first, &every); err != nil || n < 1 || every < 1 || dir == "" {
		fmt.Fprintf(os.Stderr, "scale boards: %s=%q %s=%q\n", scaleBoardsEnv, spec, scaleDirEnv, dir)
		return 2
	}
	need := scaleFilesPerBoard*n + scaleFilesSpare
	if lim, err := raiseOpenFiles(uint64(2 * need)); err != nil || lim < uint64(need) {
		fmt.Fprintf(os.Stderr, "scale boards: open files limited to %d (%v); %d boards need about %d\n", lim, err, n, need)
		return 1
	}
	member := func(i int) bool { return (first+i)%every == 0 }
	for i := range n {
		if member(i) {
			if err := presetGroups(filepath.Join(dir, fmt.Sprintf("board-%04d", i+1)), []int{1}); err != nil {
				fmt.Fprintf(os.Stderr, "scale boards: %v\n", err)
				return 1
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fm, err := fleetmode.Start(ctx, fleetmode.Options{N: n, BaseDir: dir, Parallel: 2 * runtime.GOMAXPROCS(0)})
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale boards: %v\n", err)
		return 1
	}
	defer fm.Stop()
	out := bufio.NewWriter(os.Stdout)
	for _, b := range fm.Boards() {
		g := 0
		if member(b.Index) {
			g = 1
		}
		fmt.Fprintln(out, b.URL, b.ID, g)
	}
	fmt.Fprintln(out, "ready")
	if out.Flush() != nil {
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "usage" {
			u, err := usageOf(os.Getpid())
			if err != nil {
				fmt.Fprintln(os.Stderr, "scale boards:", err)
				return 1
			}
			fmt.Fprintln(out, u.rss, int64(u.cpu))
			if out.Flush() != nil {
				return 1
			}
		}
	}
	return 0
}

// presetGroups writes groups into the saved link settings of the board
// whose data directory is dir, as an installer configures a board before
// it starts (fleetmode sets the groups only of boards on a line; a LAN
// board reports its link groups in GET /link, where the gateway reads
// them).
func presetGroups(dir string, groups []int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	db, err := store.Open(filepath.Join(dir, "settings.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	bk := db.Bucket("link")
	s := link.DefaultSettings()
	if _, err := bk.Get("link", &s); err != nil {
		return err
	}
	s.Groups = groups
	return bk.Put("link", s)
}

// raiseOpenFiles lifts the soft open-files limit towards want (up to the
// hard limit) and returns the limit in force.
func raiseOpenFiles(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < want {
		lim.Cur = min(want, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

// hardOpenFiles is the hard open-files limit every child inherits.
func hardOpenFiles() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return int(min(lim.Max, 1<<30))
}

// usage is what a process holds and has spent.
type usage struct {
	rss int64         // resident set (VmRSS), bytes
	cpu time.Duration // user + system time
}

// usageOf reads process pid's usage from /proc.
func usageOf(pid int) (usage, error) {
	var u usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			u.rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The fields after the command name (which may hold spaces): state is
	// the 3rd field of the line, utime and stime the 14th and 15th, in
	// clock ticks (USER_HZ, 100 on Linux).
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	u.cpu = time.Duration(ut+st) * (time.Second / 100)
	return u, nil
}

// scaleBoard is a board of the benchmark's installation.
type scaleBoard struct {
	url, id string
	member  bool // of group 1
}

// scaleBoardProcs are the running board processes.
type scaleBoardProcs struct {
	procs  []*scaleBoardProc
	boards [][]scaleBoard // by gateway
}

type scaleBoardProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startScaleBoards starts perGW boards for each of gateways gateways, in
// processes of at most perProc boards, and returns once all serve. Board
// k of the installation is in group 1 when k%every == 0.
func startScaleBoards(tb testing.TB, gateways, perGW, perProc, every int, dir string) *scaleBoardProcs {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	bp := &scaleBoardProcs{boards: make([][]scaleBoard, gateways)}
	tb.Cleanup(bp.stop)
	var gwOf []int
	for g := range gateways {
		for i := 0; i < perGW; i += perProc {
			first, n := g*perGW+i, min(perProc, perGW-i)
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %d", scaleBoardsEnv, n, first, every),
				scaleDirEnv+"="+filepath.Join(dir, fmt.Sprintf("boards-%d", first)))
			cmd.Stderr = os.Stderr
			// They die with the benchmark, also while stopped (pause).
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
			bp.procs = append(bp.procs, &scaleBoardProc{cmd: cmd, in: in, out: bufio.NewScanner(out)})
			gwOf = append(gwOf, g)
		}
	}
	got := make([][]scaleBoard, len(bp.procs))
	errs := make([]error, len(bp.procs))
	var wg sync.WaitGroup
	for i, p := range bp.procs {
		wg.Go(func() {
			for p.out.Scan() {
				line := p.out.Text()
				if line == "ready" {
					return
				}
				f := strings.Fields(line)
				if len(f) != 3 {
					errs[i] = fmt.Errorf("board process %d: line %q", i, line)
					return
				}
				got[i] = append(got[i], scaleBoard{url: f[0], id: f[1], member: f[2] == "1"})
			}
			errs[i] = fmt.Errorf("board process %d ended before it was ready: %v", i, p.out.Err())
		})
	}
	wg.Wait()
	for i := range bp.procs {
		if errs[i] != nil {
			tb.Fatal(errs[i])
		}
		bp.boards[gwOf[i]] = append(bp.boards[gwOf[i]], got[i]...)
	}
	for g, bs := range bp.boards {
		if len(bs) != perGW {
			tb.Fatalf("gateway %d: %d boards started, want %d", g, len(bs), perGW)
		}
	}
	return bp
}

// usage sums the board processes' usage.
func (bp *scaleBoardProcs) usage() (usage, error) {
	var sum usage
	for _, p := range bp.procs {
		if _, err := io.WriteString(p.in, "usage\n"); err != nil {
			return sum, err
		}
		if !p.out.Scan() {
			return sum, fmt.Errorf("board process: %v", p.out.Err())
		}
		var rss, cpu int64
		if _, err := fmt.Sscanf(p.out.Text(), "%d %d", &rss, &cpu); err != nil {
			return sum, fmt.Errorf("board process usage %q: %w", p.out.Text(), err)
		}
		sum.rss += rss
		sum.cpu += time.Duration(cpu)
	}
	return sum, nil
}

// pause stops (SIGSTOP) or resumes (SIGCONT) every board process.
func (bp *scaleBoardProcs) pause(stop bool) {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	for _, p := range bp.procs {
		_ = p.cmd.Process.Signal(sig)
	}
}

// quietListing lists url reps times with the board processes stopped, so
// that only the gateways and the engine run (as in an installation, where
// the boards do not share the gateway's cores), and returns the sorted
// durations and the CPU time process pid spent per listing beyond what it
// spends idle meanwhile. The boards are stopped for a few seconds: less
// than the time a gateway waits before it takes a silent stream for lost.
func quietListing(tb testing.TB, bp *scaleBoardProcs, url string, reps, want, pid int) ([]time.Duration, time.Duration) {
	tb.Helper()
	bp.pause(true)
	defer bp.pause(false)
	time.Sleep(time.Second) // what was under way settles
	rate := idleRate(tb, 3*time.Second, pid)
	c0, t0 := cpuOf(tb, []int{pid}), time.Now()
	ds, _ := listingTimes(tb, url, reps, want)
	spent := cpuOf(tb, []int{pid}) - c0 - time.Duration(rate*float64(time.Since(t0)))
	return ds, spent / time.Duration(reps+1)
}

// stop closes the board processes' input: they stop their boards and
// exit (killed after 30 s).
func (bp *scaleBoardProcs) stop() {
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

// writeBoardsFile writes a --boards-file naming the boards (no passwords:
// fleet-mode boards have none).
func writeBoardsFile(tb testing.TB, path string, bs []scaleBoard) {
	tb.Helper()
	var sb strings.Builder
	for _, b := range bs {
		sb.WriteString(b.url)
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// pid is the gateway process's id.
func (g *gwProc) pid() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cmd.Process.Pid
}

// pid is the node's process id.
func (n *natsNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// scaleClient has no overall timeout: a listing of 15,000 boards may take
// long on a busy machine, and the benchmark wants its time, not an error.
var scaleClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: 2 * time.Minute}}

// timedGET GETs url, reads the whole answer and returns how long that
// took and the body.
func timedGET(tb testing.TB, url string) (time.Duration, []byte) {
	tb.Helper()
	t0 := time.Now()
	resp, err := scaleClient.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("GET %s: %d %v %.200s", url, resp.StatusCode, err, body)
	}
	return d, body
}

// listingTimes lists url reps times (after one unmeasured listing) and
// returns the sorted durations and the answer's size.
func listingTimes(tb testing.TB, url string, reps, want int) ([]time.Duration, int) {
	tb.Helper()
	var ds []time.Duration
	size := 0
	for i := range reps + 1 {
		d, body := timedGET(tb, url)
		var bs []boardJSON
		if err := json.Unmarshal(body, &bs); err != nil {
			tb.Fatalf("listing: %v", err)
		}
		if len(bs) != want {
			tb.Fatalf("listing: %d boards, want %d", len(bs), want)
		}
		if i > 0 {
			ds = append(ds, d)
		}
		size = len(body)
	}
	slices.Sort(ds)
	return ds, size
}

// idleRate is the CPU the processes pids spend over d, in seconds per
// second.
func idleRate(tb testing.TB, d time.Duration, pids ...int) float64 {
	tb.Helper()
	c0, t0 := cpuOf(tb, pids), time.Now()
	time.Sleep(d)
	return float64(cpuOf(tb, pids)-c0) / float64(time.Since(t0))
}

// loadAverage is the machine's load (1, 5, 15 minutes) from /proc: the
// benchmark's figures are wall times, which other work on the machine
// stretches.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuOf is the CPU time the processes pids have spent so far.
func cpuOf(tb testing.TB, pids []int) time.Duration {
	tb.Helper()
	var sum time.Duration
	for _, p := range pids {
		u, err := usageOf(p)
		if err != nil {
			tb.Fatal(err)
		}
		sum += u.cpu
	}
	return sum
}

// waitOnline waits until g lists want boards online, each owned by the
// gateway owner gives (nil: any), and returns how long that took.
func waitOnline(tb testing.TB, g *gwProc, want int, owner map[string]string, d time.Duration) time.Duration {
	tb.Helper()
	t0 := time.Now()
	deadline := t0.Add(d)
	for {
		_, body := timedGET(tb, g.base()+"/v1/boards?online=true")
		var bs []boardJSON
		if err := json.Unmarshal(body, &bs); err != nil {
			tb.Fatalf("%s: listing: %v", g.name, err)
		}
		wrong := 0
		for _, b := range bs {
			if owner != nil && owner[b.URL] != b.Gateway {
				wrong++
			}
		}
		if len(bs) == want && wrong == 0 {
			return time.Since(t0)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s after %v: %d of %d boards online (%d with the wrong gateway)", g.name, d, len(bs), want, wrong)
		}
		time.Sleep(2 * time.Second)
	}
}

// engineSizes is what the engine's JetStream account holds.
type engineSizes struct {
	memory, store           uint64 // bytes
	recordMsgs, recordBytes uint64 // KV holo_boards
	eventMsgs, eventBytes   uint64 // stream HOLO_EVENTS
	streams, consumers      int
}

func readEngineSizes(tb testing.TB, url string) engineSizes {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	s := engineSizes{memory: ai.Memory, store: ai.Store, streams: ai.Streams, consumers: ai.Consumers}
	for name, dst := range map[string][2]*uint64{"KV_holo_boards": {&s.recordMsgs, &s.recordBytes}, "HOLO_EVENTS": {&s.eventMsgs, &s.eventBytes}} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			tb.Fatalf("stream %s: %v", name, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			tb.Fatalf("stream %s: %v", name, err)
		}
		*dst[0], *dst[1] = info.State.Msgs, info.State.Bytes
	}
	return s
}

// pct returns the p-th quantile of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// steadyAfter is how long after its boards came online a gateway is at
// its steady idle: each board's clock is measured twice in the first
// ClockEvery × 2 (10 s), then every ClockMaxEvery (30 s) at most, so the
// third round of every board is under way from about 37 s.
const steadyAfter = 40 * time.Second

// BenchmarkCluster15000 is the cluster's scale check: three holo-gateway
// processes on one nats-server engine, each following
// HOLO_CLUSTER_SCALE_BOARDS (default 5,000) fleet-mode LAN boards of its
// own given with --boards-file, the boards in board processes. Group 1
// has 1,000 members (every board whose number in the installation is a
// multiple of 3×boards/1000), spread evenly over the three gateways.
//
// First gateway "a" runs alone (no --cluster) over its boards, for the
// single-gateway figures; then it is restarted into the cluster on the
// same data, with "b" and "c". Once every gateway lists every board
// online, owned by its gateway, and HOLO_CLUSTER_SCALE_SETTLE (default
// 10 s) more passed, it reports:
//
//	list-p50-ms, list-max-ms    GET /v1/boards on gateway a: every board
//	                            of the installation, through the API, read
//	                            whole by the client (HOLO_CLUSTER_SCALE_REPS
//	                            times, default 10)
//	list-group-p50-ms           GET /v1/boards?group=1 on gateway a
//	list-quiet-p50-ms           GET /v1/boards on gateway a while the board
//	                            processes are stopped (SIGSTOP, a few
//	                            seconds): the boards do not share the
//	                            gateways' cores in an installation
//	list-cpu-ms                 gateway a's CPU time per listing then,
//	                            beyond its idle rate (boards stopped)
//	alone-list-p50-ms           GET /v1/boards on gateway a alone: its own
//	list-per-board-ratio        list-p50 per board over alone-list-p50 per
//	                            board: 1 when the cluster lists each board
//	                            as cheaply as a gateway lists its own; the
//	                            same of the quiet listings and of the CPU
//	                            (list-quiet-per-board-ratio,
//	                            list-cpu-per-board-ratio; alone-list-quiet-
//	                            p50-ms, alone-list-cpu-ms)
//	action-p50-ms, -max-ms      POST /v1/actions (leds) on group 1 from
//	                            gateway a, until its reply: every member
//	                            answered (LAN boards reply once applied)
//	action-seen-p50-ms, -max-ms until gateway b's /v1/events?group=1 has
//	                            handed out every member's new leds state
//	alone-action-p50-ms         the same action from gateway a alone (its
//	                            members of group 1 only)
//	action-per-board-ratio      action-p50 per member over alone's
//	action-own-p50-ms           the action on gateway a's members of group
//	                            1 by id, from gateway a (no other gateway
//	                            involved), and on gateway b's from gateway
//	action-remote-p50-ms        a (one routed request)
//	engine-rss-MB               the nats-server process's resident memory
//	engine-store-MB             its JetStream storage (every stream)
//	records-B/board             KV holo_boards bytes per board
//	gateway-rss-B/board         each gateway's resident memory over its
//	                            own boards (the mean of the three), read
//	                            after the settling time
//	alone-rss-B/board           gateway a's alone, read at the same point
//	gateway-rss-ratio           gateway-rss over alone-rss: what joining
//	                            the cluster costs in memory
//	gateway-cpu-us/board/s      the gateways' CPU at idle, over a window of
//	                            HOLO_CLUSTER_SCALE_IDLE (default 30 s: the
//	                            longest period of the clock rounds, two of
//	                            the boards' system state) from 40 s after
//	                            every board was online (the clock rounds'
//	                            steady pace), per board of the installation
//	alone-cpu-us/board/s        gateway a's alone, per own board
//	gateway-cpu-ratio           the two against each other
//	engine-cpu-us/board/s       the engine's, and the board processes',
//	boards-cpu-us/board/s       over the same window
//	events/s                    events stored in HOLO_EVENTS at idle
//
// Every figure is a wall time or a process's own resident memory and CPU
// time (/proc). On a small machine the boards and gateways themselves keep
// the cores busy (at 15,000 boards on 2 cores, most of both at idle), so
// the wall times there include waiting for a core: the log prints the
// load average beside them.
//
// Run it alone: go test -run '^$' -bench Cluster15000 -benchtime 1x
// ./gateway/cluster (about three minutes). HOLO_CLUSTER_SCALE_BOARDS=1000
// is the 3×1,000 form. HOLO_CLUSTER_SCALE_HOLD=5m keeps everything
// running that long after the figures (the log names each process), to
// look at it with a profiler.
func BenchmarkCluster15000(b *testing.B) {
	const gateways = 3
	perGW := scaleEnvInt(b, "HOLO_CLUSTER_SCALE_BOARDS", 5000)
	reps := scaleEnvInt(b, "HOLO_CLUSTER_SCALE_REPS", 10)
	idle := time.Duration(scaleEnvInt(b, "HOLO_CLUSTER_SCALE_IDLE", 30)) * time.Second
	settleFor := time.Duration(scaleEnvInt(b, "HOLO_CLUSTER_SCALE_SETTLE", 10)) * time.Second
	hard := hardOpenFiles()
	perProc := min(scaleMaxPerProcess, (hard-scaleFilesSpare)/scaleFilesPerBoard)
	if need := perGW + 1024; hard < need || perProc < 1 {
		b.Fatalf("open files limited to %d (hard): a gateway holds one stream per board and needs about %d; raise the hard limit (ulimit -Hn)", hard, need)
	}
	natsServerBin(b)
	gatewayBinary(b)
	for b.Loop() { // once: ns/op is the whole scenario
		clusterScale(b, gateways, perGW, perProc, reps, settleFor, idle)
	}
}

func clusterScale(b *testing.B, gateways, perGW, perProc, reps int, settleFor, idle time.Duration) {
	total := gateways * perGW
	every := max(1, total/1000)
	dir := b.TempDir()
	t0 := time.Now()
	bp := startScaleBoards(b, gateways, perGW, perProc, every, dir)
	owner := map[string]string{}
	names := []string{"a", "b", "c"}
	groupOf := make([]map[string]bool, gateways) // group 1's members, by gateway
	group := map[string]bool{}                   // all of them
	for g, bs := range bp.boards {
		groupOf[g] = map[string]bool{}
		for _, sb := range bs {
			owner[sb.url] = names[g]
			if sb.member {
				groupOf[g][sb.id], group[sb.id] = true, true
			}
		}
	}
	b.Logf("%d boards (group 1: %d) started in %d processes in %v; load average %s", total, len(group), len(bp.procs),
		time.Since(t0).Round(time.Millisecond), loadAverage())
	files := make([]string, gateways)
	for g := range gateways {
		files[g] = filepath.Join(dir, fmt.Sprintf("boards-%s.txt", names[g]))
		writeBoardsFile(b, files[g], bp.boards[g])
	}
	actReps := min(reps, 5)

	// Gateway a alone.
	a := &gwProc{name: "a", data: filepath.Join(dir, "gw-a")}
	a.args = []string{"--data", a.data, "--listen", "127.0.0.1:0", "--no-mqtt", "--insecure-lab", "--boards-file", files[0]}
	a.start(b)
	b.Cleanup(a.stop)
	took := waitOnline(b, a, perGW, nil, 10*time.Minute)
	online := time.Now()
	b.Logf("gateway a alone: %d boards online in %v", perGW, took.Round(time.Millisecond))
	time.Sleep(settleFor) // the start-up calls and first clock rounds are over
	aloneUse, err := usageOf(a.pid())
	if err != nil {
		b.Fatal(err)
	}
	aloneList, aloneSize := listingTimes(b, a.base()+"/v1/boards", reps, perGW)
	aloneQuiet, aloneListCPU := quietListing(b, bp, a.base()+"/v1/boards", reps, perGW, a.pid())
	aloneActs, aloneSeen := groupActions(b, a, a, groupOf[0], actReps, false)
	time.Sleep(time.Until(online.Add(steadyAfter)))
	aloneIdle := idleRate(b, idle, a.pid())
	a.stop()

	// The cluster.
	eng := startNATSCluster(b, 1)
	url := eng.URL()
	cl := append([]string{"--cluster", url, "--cluster-listen", "127.0.0.1:0"}, joinArgs(b, "", url)...)
	gws := make([]*gwProc, gateways)
	t0 = time.Now()
	for g := range gateways {
		if g == 0 {
			a.args = append(a.args, append([]string{"--name", "a"}, cl...)...)
			a.start(b)
			gws[0] = a
			continue
		}
		gw := &gwProc{name: names[g], data: filepath.Join(dir, "gw-"+names[g])}
		gw.args = append([]string{"--data", gw.data, "--listen", "127.0.0.1:0", "--no-mqtt", "--insecure-lab",
			"--boards-file", files[g], "--name", names[g]}, cl...)
		gw.start(b)
		b.Cleanup(gw.stop)
		gws[g] = gw
	}
	for _, g := range gws {
		waitOnline(b, g, total, owner, 10*time.Minute)
	}
	online = time.Now()
	b.Logf("cluster: every gateway lists %d boards online in %v", total, time.Since(t0).Round(time.Millisecond))
	time.Sleep(settleFor)
	gwUse := make([]usage, gateways)
	for g, gw := range gws {
		if gwUse[g], err = usageOf(gw.pid()); err != nil {
			b.Fatal(err)
		}
	}

	// Listing.
	list, size := listingTimes(b, gws[0].base()+"/v1/boards", reps, total)
	quiet, listCPU := quietListing(b, bp, gws[0].base()+"/v1/boards", reps, total, gws[0].pid())
	// The members of group 1 only: the cluster looks at every board and
	// keeps the members' views, the API encodes few.
	groupList, _ := listingTimes(b, gws[0].base()+"/v1/boards?group=1", reps, len(group))
	b.Logf("listing: group 1 (%d boards) p50 %v; all %d boards, %d KB: p50 %v max %v (boards stopped: p50 %v max %v, gateway CPU %v); "+
		"alone %d boards, %d KB: p50 %v max %v (boards stopped: p50 %v max %v, gateway CPU %v)",
		len(group), pct(groupList, .5).Round(time.Microsecond), total, size>>10,
		pct(list, .5).Round(time.Microsecond), list[len(list)-1].Round(time.Microsecond),
		pct(quiet, .5).Round(time.Microsecond), quiet[len(quiet)-1].Round(time.Microsecond), listCPU.Round(time.Microsecond),
		perGW, aloneSize>>10, pct(aloneList, .5).Round(time.Microsecond), aloneList[len(aloneList)-1].Round(time.Microsecond),
		pct(aloneQuiet, .5).Round(time.Microsecond), aloneQuiet[len(aloneQuiet)-1].Round(time.Microsecond), aloneListCPU.Round(time.Microsecond))

	// Actions on group 1, watched from gateway b.
	acts, seen := groupActions(b, gws[0], gws[1], group, actReps, false)
	// Where the time goes: the same action on the members of one gateway
	// only, by id, from that gateway and from another.
	own, _ := groupActions(b, gws[0], gws[0], groupOf[0], actReps, true)
	remote, _ := groupActions(b, gws[0], gws[0], groupOf[1], actReps, true)
	b.Logf("action on gateway a's %d members by id: p50 %v; on gateway b's %d from a: p50 %v", len(groupOf[0]),
		pct(own, .5).Round(time.Microsecond), len(groupOf[1]), pct(remote, .5).Round(time.Microsecond))
	b.Logf("action on group 1 (%d boards): reply p50 %v max %v; seen on b p50 %v max %v; alone (%d boards): reply p50 %v, seen p50 %v; load average %s",
		len(group), pct(acts, .5).Round(time.Microsecond), acts[len(acts)-1].Round(time.Microsecond),
		pct(seen, .5).Round(time.Microsecond), seen[len(seen)-1].Round(time.Microsecond),
		len(groupOf[0]), pct(aloneActs, .5).Round(time.Microsecond), pct(aloneSeen, .5).Round(time.Microsecond), loadAverage())

	// Idle: CPU of each process, and the events stored, over the window.
	time.Sleep(time.Until(online.Add(steadyAfter)))
	engPID := eng.nodes[0].pid()
	before := map[int]usage{}
	pids := []int{engPID}
	for _, g := range gws {
		pids = append(pids, g.pid())
	}
	for _, p := range pids {
		if before[p], err = usageOf(p); err != nil {
			b.Fatal(err)
		}
	}
	boardsBefore, err := bp.usage()
	if err != nil {
		b.Fatal(err)
	}
	sizesBefore := readEngineSizes(b, url)
	w0 := time.Now()
	time.Sleep(idle)
	window := time.Since(w0)
	after := map[int]usage{}
	for _, p := range pids {
		if after[p], err = usageOf(p); err != nil {
			b.Fatal(err)
		}
	}
	boardsAfter, err := bp.usage()
	if err != nil {
		b.Fatal(err)
	}
	sizes := readEngineSizes(b, url)
	perBoardS := func(d time.Duration) float64 { return float64(d.Microseconds()) / window.Seconds() / float64(total) }
	var gwRSS int64
	var gwCPU time.Duration
	var each []string
	for i, g := range gws {
		u := after[g.pid()]
		c := u.cpu - before[g.pid()].cpu
		each = append(each, fmt.Sprintf("%s %d MB (%d MB after the listings and actions), CPU at idle %.2f of a core",
			g.name, gwUse[i].rss>>20, u.rss>>20, c.Seconds()/window.Seconds()))
		gwRSS += gwUse[i].rss
		gwCPU += c
	}
	b.Logf("gateways: resident %s; alone: %d MB, %.2f of a core", strings.Join(each, "; "), aloneUse.rss>>20, aloneIdle)
	engU := after[engPID]
	engCPU := engU.cpu - before[engPID].cpu
	boardsCPU := boardsAfter.cpu - boardsBefore.cpu
	events := float64(sizes.eventMsgs-sizesBefore.eventMsgs) / window.Seconds()
	b.Logf("engine: resident %d MB, CPU at idle %.2f of a core; JetStream memory %d KB, store %d KB, %d streams, %d consumers; "+
		"holo_boards %d records, %d KB; HOLO_EVENTS %d events, %d KB, %.0f/s at idle",
		engU.rss>>20, engCPU.Seconds()/window.Seconds(), sizes.memory>>10, sizes.store>>10, sizes.streams, sizes.consumers,
		sizes.recordMsgs, sizes.recordBytes>>10, sizes.eventMsgs, sizes.eventBytes>>10, events)
	b.Logf("boards: resident %d MB (%.0f KB per board), CPU at idle %.2f of a core", boardsAfter.rss>>20,
		float64(boardsAfter.rss)/float64(total)/1024, boardsCPU.Seconds()/window.Seconds())

	perGWRSS := float64(gwRSS) / float64(gateways) / float64(perGW)
	aloneRSS := float64(aloneUse.rss) / float64(perGW)
	b.ReportMetric(float64(total), "boards")
	b.ReportMetric(ms(pct(list, .5)), "list-p50-ms")
	b.ReportMetric(ms(list[len(list)-1]), "list-max-ms")
	b.ReportMetric(ms(pct(aloneList, .5)), "alone-list-p50-ms")
	b.ReportMetric(ms(pct(groupList, .5)), "list-group-p50-ms")
	b.ReportMetric(ms(pct(quiet, .5)), "list-quiet-p50-ms")
	b.ReportMetric(ms(pct(aloneQuiet, .5)), "alone-list-quiet-p50-ms")
	b.ReportMetric((ms(pct(quiet, .5))/float64(total))/(ms(pct(aloneQuiet, .5))/float64(perGW)), "list-quiet-per-board-ratio")
	b.ReportMetric(ms(listCPU), "list-cpu-ms")
	b.ReportMetric(ms(aloneListCPU), "alone-list-cpu-ms")
	b.ReportMetric((ms(listCPU)/float64(total))/(ms(aloneListCPU)/float64(perGW)), "list-cpu-per-board-ratio")
	b.ReportMetric((ms(pct(list, .5))/float64(total))/(ms(pct(aloneList, .5))/float64(perGW)), "list-per-board-ratio")
	b.ReportMetric(ms(pct(acts, .5)), "action-p50-ms")
	b.ReportMetric(ms(acts[len(acts)-1]), "action-max-ms")
	b.ReportMetric(ms(pct(seen, .5)), "action-seen-p50-ms")
	b.ReportMetric(ms(seen[len(seen)-1]), "action-seen-max-ms")
	b.ReportMetric(ms(pct(aloneActs, .5)), "alone-action-p50-ms")
	b.ReportMetric(ms(pct(own, .5)), "action-own-p50-ms")
	b.ReportMetric(ms(pct(remote, .5)), "action-remote-p50-ms")
	b.ReportMetric((ms(pct(acts, .5))/float64(len(group)))/(ms(pct(aloneActs, .5))/float64(len(groupOf[0]))), "action-per-board-ratio")
	b.ReportMetric(float64(engU.rss)/(1<<20), "engine-rss-MB")
	b.ReportMetric(float64(sizes.store)/(1<<20), "engine-store-MB")
	b.ReportMetric(float64(sizes.recordBytes)/float64(total), "records-B/board")
	b.ReportMetric(perGWRSS, "gateway-rss-B/board")
	b.ReportMetric(aloneRSS, "alone-rss-B/board")
	b.ReportMetric(perGWRSS/aloneRSS, "gateway-rss-ratio")
	b.ReportMetric(perBoardS(gwCPU), "gateway-cpu-us/board/s")
	b.ReportMetric(aloneIdle*1e6/float64(perGW), "alone-cpu-us/board/s")
	b.ReportMetric(perBoardS(gwCPU)/(aloneIdle*1e6/float64(perGW)), "gateway-cpu-ratio")
	b.ReportMetric(perBoardS(engCPU), "engine-cpu-us/board/s")
	b.ReportMetric(perBoardS(boardsCPU), "boards-cpu-us/board/s")
	b.ReportMetric(events, "events/s")
	if hold := os.Getenv("HOLO_CLUSTER_SCALE_HOLD"); hold != "" {
		d, err := time.ParseDuration(hold)
		if err != nil {
			b.Fatalf("HOLO_CLUSTER_SCALE_HOLD=%q: want a duration", hold)
		}
		for _, g := range gws {
			b.Logf("holding for %v: gateway %s pid %d at %s", d, g.name, g.pid(), g.base())
		}
		b.Logf("engine pid %d at %s", engPID, url)
		time.Sleep(d)
	}
}

// actionSeq numbers the benchmark's actions: each sets a brightness the
// one before did not, so every board's state changes (a repeated state
// is no event).
var actionSeq int

// groupActions runs reps leds actions from gateway from on the members of
// group 1 in groupIDs (by the group, or byID by their ids), each until its
// reply and until every member's new state came out of watcher's
// /v1/events?group=1; it returns both times of each, sorted.
func groupActions(tb testing.TB, from, watcher *gwProc, groupIDs map[string]bool, reps int, byID bool) (replies, seen []time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", watcher.base()+"/v1/events?group=1", nil)
	resp, err := scaleClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 {
		tb.Fatalf("%s /v1/events: %d", watcher.name, resp.StatusCode)
	}
	defer resp.Body.Close()
	ledsEvents := make(chan eventJSON, 4096)
	go func() {
		defer close(ledsEvents)
		dec := json.NewDecoder(resp.Body)
		for {
			var m struct {
				Result eventJSON `json:"result"`
			}
			if dec.Decode(&m) != nil {
				return
			}
			if m.Result.Type == "state" && m.Result.Kind == "leds" {
				select {
				case ledsEvents <- m.Result:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	time.Sleep(time.Second) // the watch is in place
	members := len(groupIDs)
	sel := map[string]any{"groups": []int{1}}
	if byID {
		sel = map[string]any{"boards": slices.Sorted(maps.Keys(groupIDs))}
	}
	for range reps {
		brightness := 10 + actionSeq%80
		actionSeq++
		want := fmt.Sprintf(`"brightness":%d`, brightness)
		var res struct {
			Results []struct{ Board, Error string } `json:"results"`
		}
		t0 := time.Now()
		code, body := from.rest(tb, "POST", "/v1/actions", map[string]any{"kind": "leds",
			"selector": sel, "body": map[string]any{"mode": "solid", "brightness": brightness}})
		replies = append(replies, time.Since(t0))
		if code != 200 {
			tb.Fatalf("action: %d %.300s", code, body)
		}
		if err := json.Unmarshal(body, &res); err != nil {
			tb.Fatal(err)
		}
		failed := 0
		for _, r := range res.Results {
			if r.Error != "" || !groupIDs[r.Board] {
				failed++
			}
		}
		if len(res.Results) != members || failed > 0 {
			tb.Fatalf("action: %d results for %d members, %d failed", len(res.Results), members, failed)
		}
		got := map[string]bool{}
		timeout := time.After(2 * time.Minute)
		for len(got) < members {
			select {
			case e, ok := <-ledsEvents:
				if !ok {
					tb.Fatalf("events: the stream ended after %d of %d members", len(got), members)
				}
				if groupIDs[e.Board] && strings.Contains(e.Data, want) {
					got[e.Board] = true
				}
			case <-timeout:
				tb.Fatalf("events: %d of %d members' leds seen after 2 min", len(got), members)
			}
		}
		seen = append(seen, time.Since(t0))
	}
	slices.Sort(replies)
	slices.Sort(seen)
	return replies, seen
}
