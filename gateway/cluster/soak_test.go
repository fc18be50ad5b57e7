package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/testbin"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/fleetmode"
)

// The soak: TestSoak runs a cluster for SOAK (default 30m) while a show
// fires and rollouts run, and kills one of its processes every 20-40 s.
// docs/cluster.md ("The soak") describes it; make soak runs it.

// soakBoardEnv makes the test binary a LAN board process: one fleet-mode
// board with its data in the directory the variable names. It writes
// "url URL" once it serves and "boot VERSION" at each boot, and runs
// until it is killed.
const soakBoardEnv = "HOLOFLEET_SOAK_BOARD"

func init() {
	childMains[soakBoardEnv] = soakBoardProcess
}

func soakBoardProcess(dir string) int {
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: 1, BaseDir: dir,
		OTA: &fleetmode.OTAOptions{OnBoot: func(_ int, a boardapi.App) { say("boot %s", a.Version) }}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak board:", err)
		return 1
	}
	defer fm.Stop()
	say("url %s", fm.Boards()[0].URL)
	select {} // until killed
}

// boardProc is a LAN board process of the soak, reached through a proxy
// whose address stays when the process restarts on another port.
type boardProc struct {
	dir string
	px  *proxy

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	boots  []string
	out    *testbin.Output
}

func (b *boardProc) URL() string { return "http://" + b.px.ln.Addr().String() }

// start runs the process and points the proxy at it once it serves.
func (b *boardProc) start() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), soakBoardEnv+"="+b.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	b.out = &testbin.Output{}
	cmd.Stderr = b.out
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "url":
				ready <- f[1]
			case len(f) == 2 && f[0] == "boot":
				b.mu.Lock()
				b.boots = append(b.boots, f[1])
				b.mu.Unlock()
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	b.mu.Lock()
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()
	select {
	case u := <-ready:
		pu, err := url.Parse(u)
		if err != nil {
			return err
		}
		b.px.retarget(pu.Host)
		return nil
	case <-exited:
		return fmt.Errorf("board process %s ended: %s", b.dir, b.out.String())
	case <-time.After(60 * time.Second):
		return fmt.Errorf("board process %s did not serve", b.dir)
	}
}

func (b *boardProc) kill() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (b *boardProc) bootList() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.boots)
}

// startMosquittoProc runs a Mosquitto of the soak's own (it is killed:
// the machine's is not) on a free port.
func startMosquittoProc(t *testing.T) *natsNode {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin = "/usr/sbin/mosquitto"
		if _, err := os.Stat(bin); err != nil {
			t.Skip("no mosquitto binary (apt-get install mosquitto)")
		}
	}
	port := freePorts(t, 1)[0]
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	lines := []string{fmt.Sprintf("listener %d 127.0.0.1", port), "allow_anonymous true", "persistence false", "log_dest stderr",
		"log_type error"}
	if os.Getuid() == 0 {
		lines = append(lines, "user root")
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &natsNode{name: "mosquitto", args: []string{"-c", conf}, client: port, bin: bin, dir: dir, out: &testbin.Output{}}
	n.start(t)
	t.Cleanup(n.stop)
	n.waitListening(t)
	return n
}

// soakEvent is an event of /v1/events as the soak checks it.
type soakEvent struct {
	N     string `json:"n"`
	Board string `json:"board"`
	Type  string `json:"type"`
	Kind  string `json:"kind"`
	Seq   uint16 `json:"seq"`
}

// soakBoardLog is what the event check keeps of one board.
type soakBoardLog struct {
	last       uint16    // the last happening's seq (0: none since the start or a restart)
	lastAt     time.Time // when the watch read the last happening
	happenings int
	restarts   int
}

// soak is the running soak: its processes and what it counted.
type soak struct {
	t      *testing.T
	gws    []*gwProc
	nodes  []*natsNode
	mq     *natsNode
	bps    []*boardProc
	sites  []*site
	boards int
	base   string // the MQTT base topic

	mu             sync.Mutex
	down           map[any]bool   // processes killed and not yet back
	killsBy        map[string]int // kills by kind
	killsOf        map[*gwProc][]time.Time
	recovery       []time.Duration // kill to healthy again
	problems       []string        // what failed
	answered       map[*gwProc][]soakAnswer
	showOK         int
	showFail       int
	rolloutResults []string // "version: state"
	versions       []string // rolled out, in order
	boardLogs      map[string]*soakBoardLog
	events         int
	gaps           []string
	reorders       []string
	lastN          uint64
	kills          []string          // when, what, and the last event number read then
	stalls         int               // event watches silent for 10 s, resumed
	showOver       bool              // the show stopped
	names          map[string]string // board id -> "LAN board 1", "line board 2.1"
}

type soakAnswer struct {
	id string
	at time.Time
}

func (s *soak) problem(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	s.problems = append(s.problems, time.Now().UTC().Format("15:04:05 ")+msg)
	s.t.Log("soak problem:", msg)
}

// live returns a gateway that is up (nil when none is).
func (s *soak) live(rng *rand.Rand) *gwProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	var up []*gwProc
	for _, g := range s.gws {
		if !s.down[g] {
			up = append(up, g)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[rng.IntN(len(up))]
}

// TestSoak runs three gateways on a three-node nats-server engine, each
// with an RS485 line of two boards and a LAN board process it shares
// with the next gateway, all bridged to a Mosquitto of the soak's own,
// for SOAK (default 30m). Meanwhile a show fires ten timed actions a
// second (a scene on every board, each a happening), firmware rollouts
// run one after another, and every 20-40 s one of the processes (a
// gateway, a board process, Mosquitto, a nats-server node) is killed
// with SIGKILL and started again; the time until every gateway lists
// every board online and every bridge is online on the broker again is
// its recovery time. At the end: no happening lost or reordered per
// board in /v1/events over the whole run, every rollout done with every
// board having booted each version once, every board bootable, each
// gateway's audit log holding every action it answered (except those a
// kill of it took before they were written). The report,
// soak-report.md, goes to HOLO_SOAK_REPORT (default: the test's
// temporary directory).
func TestSoak(t *testing.T) {
	testlevel.RequireSoak(t)
	dur := 30 * time.Minute
	if v := os.Getenv("SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SOAK=%q: want a duration", v)
		}
		dur = d
	}
	reportDir := os.Getenv("HOLO_SOAK_REPORT")
	if reportDir == "" {
		reportDir = t.TempDir()
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(7, seed))
	s := &soak{t: t, down: map[any]bool{}, killsBy: map[string]int{}, killsOf: map[*gwProc][]time.Time{},
		answered: map[*gwProc][]soakAnswer{}, boardLogs: map[string]*soakBoardLog{},
		base: fmt.Sprintf("soak-%d", os.Getpid()), names: map[string]string{}}
	started := time.Now()

	// The processes.
	nc := startNATSCluster(t, 3)
	s.nodes = nc.nodes
	s.mq = startMosquittoProc(t)
	for i := range 3 {
		dir, err := os.MkdirTemp("", "holo-soak-board")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		bp := &boardProc{dir: dir, px: startProxy(t, "127.0.0.1:1")}
		if err := bp.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bp.kill)
		s.bps = append(s.bps, bp)
		_ = i
	}
	mq := []string{"--no-mqtt=false", "--mqtt", fmt.Sprintf("tcp://127.0.0.1:%d", s.mq.client), "--mqtt-base", s.base}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	bin := gatewayBinary(t)
	for i := range 3 {
		st := startSite(t, 2, 0)
		s.sites = append(s.sites, st)
		args := append(slices.Clone(mq), "--board", s.bps[i].URL(), "--board", s.bps[(i+1)%3].URL())
		g := newGateway(t, fmt.Sprintf("gw%d", i+1), nc.URL(), st, false, args...)
		g.logDir = reportDir
		_ = os.Remove(filepath.Join(reportDir, g.name+".log"))
		s.gws = append(s.gws, g)
		wg.Go(func() { errs[i] = g.launch(bin) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s.boards = 3*2 + len(s.bps)
	if err := s.healthy(3 * time.Minute); err != nil {
		t.Fatalf("the cluster did not come up: %v", err)
	}
	// Board ids by what they are, for the report.
	var listed []boardJSON
	if err := httpJSON(s.gws[0].base()+"/v1/boards", &listed); err != nil {
		t.Fatal(err)
	}
	for _, b := range listed {
		for i, bp := range s.bps {
			if b.URL == bp.URL() {
				s.names[b.ID] = fmt.Sprintf("LAN board %d", i+1)
			}
		}
		for i, st := range s.sites {
			if j := slices.Index(st.lineURLs, b.URL); j >= 0 {
				s.names[b.ID] = fmt.Sprintf("line board %d.%d", i+1, j+1)
			}
		}
	}
	t.Logf("soak for %v (seed %d): %d boards, cluster up in %v", dur, seed, s.boards, time.Since(started).Round(time.Second))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var work sync.WaitGroup
	work.Go(func() { s.watchEvents(ctx) })
	showCtx, stopShow := context.WithCancel(ctx)
	work.Go(func() { s.show(showCtx, rand.New(rand.NewPCG(8, seed))) })
	rolloutCtx, stopRollouts := context.WithCancel(ctx)
	rolloutsDone := make(chan struct{})
	go func() { defer close(rolloutsDone); s.rollouts(rolloutCtx, rand.New(rand.NewPCG(9, seed))) }()
	killCtx, stopKills := context.WithCancel(ctx)
	killsDone := make(chan struct{})
	go func() { defer close(killsDone); s.kill(killCtx, rng) }()

	// The run.
	select {
	case <-time.After(dur):
	case <-ctx.Done():
	}
	stopKills()
	<-killsDone
	stopShow()
	s.mu.Lock()
	s.showOver = true
	s.mu.Unlock()
	stopRollouts() // the rollout under way finishes; no new one starts
	<-rolloutsDone
	if err := s.healthy(3 * time.Minute); err != nil {
		s.problem("the cluster is not healthy at the end: %v", err)
	}
	s.drain(ctx, rng)
	stop()
	work.Wait()

	if len(s.rolloutResults) == 0 {
		s.problem("no rollout finished")
	}
	s.checkBoots()
	s.checkBootable()
	auditMissing, auditLost := s.checkAudit(started)
	report := s.report(dur, seed, time.Since(started), auditMissing, auditLost)
	path := filepath.Join(reportDir, "soak-report.md")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("report %s:\n%s", path, report)
	if len(s.problems) > 0 || len(s.gaps) > 0 || len(s.reorders) > 0 {
		t.Errorf("%d problems, %d gaps, %d reorders (see the report)", len(s.problems), len(s.gaps), len(s.reorders))
	}
}

// healthy waits until every gateway lists every board online and every
// bridge says online on the broker (d at most).
func (s *soak) healthy(d time.Duration) error {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		if last = s.healthyNow(); last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond) // polling a condition
	}
	return last
}

func (s *soak) healthyNow() error {
	for _, g := range s.gws {
		var bs []boardJSON
		if err := httpJSON(g.base()+"/v1/boards", &bs); err != nil {
			return err
		}
		if len(bs) != s.boards {
			return fmt.Errorf("%s lists %d boards, want %d", g.name, len(bs), s.boards)
		}
		for _, b := range bs {
			if !b.Online {
				return fmt.Errorf("%s: board %s offline: %s", g.name, b.ID, b.OfflineReason)
			}
		}
	}
	return s.bridgesOnline()
}

// bridgesOnline reads every bridge's retained state from the broker.
func (s *soak) bridgesOnline() error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.mq.client), time.Second)
	if err != nil {
		return fmt.Errorf("mosquitto: %v", err)
	}
	c.Close()
	out, err := exec.Command("mosquitto_sub", "-h", "127.0.0.1", "-p", strconv.Itoa(s.mq.client), "-t", s.base+"/bridge/gateway/+/state",
		"-v", "-C", "3", "-W", "2").Output()
	if err != nil {
		return fmt.Errorf("bridge states: %v: %s", err, out)
	}
	for _, g := range s.gws {
		want := s.base + "/bridge/gateway/" + g.name + "/state "
		ok := false
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, want) && strings.Contains(l, `"state":"online"`) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("bridge %s not online on the broker: %s", g.name, out)
		}
	}
	return nil
}

// show fires ten timed actions a second through the live gateways: a
// scene on every board, 300 ms ahead.
func (s *soak) show(ctx context.Context, rng *rand.Rand) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	sem := make(chan struct{}, 20)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		g := s.live(rng)
		if g == nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			s.mu.Lock()
			s.showFail++ // the gateways are behind: this one is not sent
			s.mu.Unlock()
			continue
		}
		id := fmt.Sprintf("soak-%d", i)
		body := map[string]any{"kind": "scene_apply", "selector": map[string]any{"all": true}, "lead_ms": 300,
			"body": map[string]any{"scene": map[string]any{"leds": map[string]any{"mode": "solid", "brightness": 1 + i%100}}}}
		inflight.Go(func() {
			defer func() { <-sem }()
			b, _ := json.Marshal(body)
			req, _ := http.NewRequest("POST", g.base()+"/v1/actions", strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Request-Id", id)
			resp, err := client.Do(req)
			ok := err == nil && resp.StatusCode == 200
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if ok {
				s.showOK++
				s.answered[g] = append(s.answered[g], soakAnswer{id: id, at: time.Now()})
			} else {
				s.showFail++
			}
		})
	}
}

// rollouts runs rollouts one after another until ctx ends (the one under
// way is finished first).
func (s *soak) rollouts(ctx context.Context, rng *rand.Rand) {
	for round := 0; ctx.Err() == nil; round++ {
		version := fmt.Sprintf("%d.0.0", round+2)
		img := testImage(s.t, version, 8<<10)
		var sha, id string
		if !s.retry(ctx, 5*time.Minute, func() error {
			g := s.live(rng)
			if g == nil {
				return fmt.Errorf("no gateway up")
			}
			var err error
			sha, err = upload(g, img)
			return err
		}) {
			return
		}
		plan := map[string]any{"artifact": sha, "target": map[string]any{"all": true}, "waves": []map[string]any{{"percent": 100}},
			"max_in_flight": 3, "bandwidth": 64 << 10, "retries": 20, "backoff": "1s"}
		retried := false
		if !s.retry(ctx, 5*time.Minute, func() error {
			g := s.live(rng)
			if g == nil {
				return fmt.Errorf("no gateway up")
			}
			code, b := g.rest(s.t, "POST", "/v1/rollouts", plan)
			if m := activeRollout.FindStringSubmatch(string(b)); code == 400 && m != nil && retried {
				// A try whose answer a kill took had created it: the
				// soak is the only client making rollouts.
				s.t.Logf("rollout of %s: created by a try whose answer was lost (%s)", version, m[1])
				id = m[1]
				return nil
			}
			if code == 400 && strings.Contains(string(b), "in no gateway of the cluster") {
				// The gateway holding the image is being restarted.
				return fmt.Errorf("%d %s", code, b)
			}
			if code == 400 {
				s.problem("rollout plan refused: %s", b)
				return nil
			}
			retried = code != 200
			if code != 200 {
				return fmt.Errorf("%d %s", code, b)
			}
			var ro rolloutJSON
			if err := jsonUnmarshal(b, &ro); err != nil {
				return err
			}
			id = ro.ID
			return nil
		}) || id == "" {
			return
		}
		s.mu.Lock()
		s.versions = append(s.versions, version)
		s.mu.Unlock()
		var ro rolloutJSON
		// Finished even after ctx ends: a rollout is never left half done.
		if !s.retry(context.Background(), 15*time.Minute, func() error {
			g := s.live(rng)
			if g == nil {
				return fmt.Errorf("no gateway up")
			}
			r, err := rolloutOn(s.t, g, id)
			if err != nil {
				return err
			}
			if ro = r; !r.Finished {
				return fmt.Errorf("not finished: %+v", r)
			}
			return nil
		}) {
			s.problem("rollout %s of %s not finished: %+v", id, version, ro)
			s.logRolloutBoards(rng, id, version)
			return
		}
		s.mu.Lock()
		s.rolloutResults = append(s.rolloutResults, version+": "+ro.State)
		s.mu.Unlock()
		s.t.Logf("rollout of %s: %s", version, ro.State)
		s.logRolloutBoards(rng, id, version)
		if ro.State != "done" {
			s.problem("rollout %s of %s: %s (%s) %v", id, version, ro.State, ro.Reason, ro.Progress.Phases)
		}
	}
}

// logRolloutBoards writes each board's part in rollout id to the log:
// its phase, retries spent, next try and timeline (what a rollout that
// took long, or did not finish, did on each board).
func (s *soak) logRolloutBoards(rng *rand.Rand, id, version string) {
	var rbs []struct {
		Board    string `json:"board"`
		Phase    string `json:"phase"`
		Attempts int    `json:"attempts"`
		NextTry  string `json:"next_try"`
		Timeline []struct {
			Time  time.Time `json:"time"`
			Phase string    `json:"phase"`
			Note  string    `json:"note"`
		} `json:"timeline"`
	}
	if !s.retry(context.Background(), time.Minute, func() error {
		g := s.live(rng)
		if g == nil {
			return fmt.Errorf("no gateway up")
		}
		code, b := g.rest(s.t, "GET", "/v1/rollouts/"+id+"/boards", nil)
		if code != 200 {
			return fmt.Errorf("%d %s", code, b)
		}
		return jsonUnmarshal(b, &rbs)
	}) {
		return
	}
	for _, b := range rbs {
		var tl []string
		for _, st := range b.Timeline {
			tl = append(tl, st.Time.UTC().Format("15:04:05.000")+" "+st.Phase+" "+st.Note)
		}
		s.t.Logf("rollout of %s: %s (%s): %s, %d attempts, next try %q:\n\t%s", version, b.Board, s.names[b.Board],
			b.Phase, b.Attempts, b.NextTry, strings.Join(tl, "\n\t"))
	}
}

// activeRollout finds the rollout a refused plan's boards are in.
var activeRollout = regexp.MustCompile(`in active rollout ([0-9a-f]+)`)

// retry calls f until it succeeds (true), d passes or ctx ends (false;
// a lapse of d is a problem).
func (s *soak) retry(ctx context.Context, d time.Duration, f func() error) bool {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			s.t.Logf("stopped while retrying: %v", err)
			return false
		}
		if time.Now().After(deadline) {
			s.problem("gave up after %v: %v", d, err)
			return false
		}
		select {
		case <-ctx.Done():
			s.t.Logf("stopped while retrying: %v", err)
			return false
		case <-time.After(250 * time.Millisecond): // a retry's pause
		}
	}
}

// kill kills one process every 20-40 s and starts it again, then waits
// for the cluster to be healthy.
func (s *soak) kill(ctx context.Context, rng *rand.Rand) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(20+rng.IntN(21)) * time.Second):
		}
		kinds := []string{"gateway", "board", "mosquitto", "nats"}
		kind := kinds[rng.IntN(len(kinds))]
		var what string
		at := time.Now()
		switch kind {
		case "gateway":
			g := s.gws[rng.IntN(len(s.gws))]
			what = g.name
			s.mu.Lock()
			s.down[g] = true
			s.killsOf[g] = append(s.killsOf[g], at)
			s.mu.Unlock()
			g.kill()
			if err := g.launch(gatewayBinary(s.t)); err != nil {
				s.problem("restart %s: %v", g.name, err)
				return
			}
			s.mu.Lock()
			delete(s.down, g)
			s.mu.Unlock()
		case "board":
			i := rng.IntN(len(s.bps))
			what = fmt.Sprintf("LAN board %d", i+1)
			s.bps[i].kill()
			if err := s.bps[i].start(); err != nil {
				s.problem("restart %s: %v", what, err)
				return
			}
		case "mosquitto":
			what = "mosquitto"
			s.mq.kill()
			s.mq.start(s.t)
			s.mq.waitListening(s.t)
		case "nats":
			n := s.nodes[rng.IntN(len(s.nodes))]
			what = "nats " + n.name
			n.kill()
			n.start(s.t)
			n.waitListening(s.t)
		}
		err := s.healthy(2 * time.Minute)
		rec := time.Since(at)
		s.mu.Lock()
		s.kills = append(s.kills, fmt.Sprintf("%s %s (event watch at %d)", at.UTC().Format("15:04:05.000"), what, s.lastN))
		s.killsBy[kind]++
		s.recovery = append(s.recovery, rec)
		s.mu.Unlock()
		if err != nil {
			s.problem("not healthy 2 min after the kill of %s: %v", what, err)
		} else {
			s.t.Logf("killed %s; healthy again after %v", what, rec.Round(time.Millisecond))
		}
	}
}

// watchEvents follows /v1/events on a live gateway, resuming after the
// last event on another when the one it reads dies, or stays silent for
// 10 s while the show runs (a watch can stall when an engine node dies:
// docs/cluster.md), and checks each board's happenings: within one run
// of the board (between two "restarted"), seq goes up by one (65535 is
// followed by 1).
func (s *soak) watchEvents(ctx context.Context) {
	rng := rand.New(rand.NewPCG(10, 1))
	for ctx.Err() == nil {
		g := s.live(rng)
		if g == nil {
			time.Sleep(100 * time.Millisecond) // a retry's pause
			continue
		}
		s.mu.Lock()
		after := s.lastN
		s.mu.Unlock()
		rctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(rctx, "GET", fmt.Sprintf("%s/v1/events?after=%d", g.base(), after), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			if err == nil {
				resp.Body.Close()
			}
			cancel()
			time.Sleep(100 * time.Millisecond) // a retry's pause
			continue
		}
		got := make(chan soakEvent, 1024)
		go func() {
			defer close(got)
			dec := json.NewDecoder(resp.Body)
			for {
				var m struct {
					Result soakEvent `json:"result"`
				}
				if dec.Decode(&m) != nil {
					return
				}
				got <- m.Result
			}
		}()
		quiet := time.NewTimer(10 * time.Second)
	read:
		for {
			select {
			case e, ok := <-got:
				if !ok {
					break read
				}
				s.take(e)
				quiet.Reset(10 * time.Second)
			case <-quiet.C:
				s.mu.Lock()
				showing := !s.showOver
				if showing {
					s.stalls++
				}
				s.mu.Unlock()
				if showing {
					s.t.Logf("the event watch on %s was silent for 10 s while the show ran: resuming", g.name)
				}
				break read
			case <-ctx.Done():
				break read
			}
		}
		quiet.Stop()
		cancel()
		resp.Body.Close()
		for range got {
		}
	}
}

func (s *soak) take(e soakEvent) {
	n, err := strconv.ParseUint(e.N, 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 || n <= s.lastN {
		// A replay of what was read already, or a cut-off gateway's
		// preview of its boards' events, numbered with the last number
		// its client had: they come again with their own number
		// (docs/cluster.md).
		return
	}
	if n > s.lastN {
		s.lastN = n
	}
	s.events++
	bl := s.boardLogs[e.Board]
	if bl == nil {
		bl = &soakBoardLog{}
		s.boardLogs[e.Board] = bl
	}
	switch e.Type {
	case "restarted":
		bl.last = 0
		bl.restarts++
	case "happening":
		bl.happenings++
		if bl.last != 0 {
			want := bl.last + 1
			if want == 0 {
				want = 1
			}
			switch {
			case e.Seq == want:
			case e.Seq > want || (e.Seq < bl.last && bl.last-e.Seq > 60000):
				s.gaps = append(s.gaps, fmt.Sprintf("gap: board %s (%s): seq %d after %d (event %d, read %s)", e.Board, s.names[e.Board], e.Seq, bl.last, n, time.Now().UTC().Format("15:04:05.000")))
			default:
				s.reorders = append(s.reorders, fmt.Sprintf("reorder: board %s (%s): seq %d after %d (event %d, read %s)", e.Board, s.names[e.Board], e.Seq, bl.last, n, time.Now().UTC().Format("15:04:05.000")))
			}
		}
		bl.last, bl.lastAt = e.Seq, time.Now()
	}
}

// drain fires one more action and waits until every board's happening
// of it reached the event watch: the watch has read the whole run.
func (s *soak) drain(ctx context.Context, rng *rand.Rand) {
	counts := func() map[string]int {
		s.mu.Lock()
		defer s.mu.Unlock()
		m := map[string]int{}
		for id, bl := range s.boardLogs {
			m[id] = bl.happenings
		}
		return m
	}
	before := counts()
	ok := s.retry(ctx, time.Minute, func() error {
		g := s.live(rng)
		if g == nil {
			return fmt.Errorf("no gateway up")
		}
		var res struct {
			Results []struct{ Board, Error string } `json:"results"`
		}
		code, b := g.rest(s.t, "POST", "/v1/actions", map[string]any{"kind": "scene_apply", "selector": map[string]any{"all": true},
			"body": map[string]any{"scene": map[string]any{"leds": map[string]any{"mode": "solid", "brightness": 100}}}})
		if code != 200 {
			return fmt.Errorf("%d %s", code, b)
		}
		if err := jsonUnmarshal(b, &res); err != nil {
			return err
		}
		for _, r := range res.Results {
			if r.Error != "" {
				return fmt.Errorf("%+v", r)
			}
		}
		return nil
	})
	if !ok {
		return
	}
	if s.retry(ctx, time.Minute, func() error {
		now := counts()
		if len(now) < s.boards {
			return fmt.Errorf("events of %d boards seen, want %d", len(now), s.boards)
		}
		for id, n := range now {
			if n <= before[id] {
				return fmt.Errorf("the last action's happening of board %s not seen", id)
			}
		}
		return nil
	}) {
		return
	}
	now := counts()
	for id := range s.names {
		if now[id] <= before[id] {
			s.explainMiss(id)
		}
	}
}

// explainMiss writes to the report where board id's happening of the
// drain's action stopped: what the board itself keeps after the last
// happening the event watch read (none: the board never made it; some:
// a gateway did not fetch or publish them), and how each gateway sees
// the board (its owner, online, transports) and its events still
// waiting for the engine.
func (s *soak) explainMiss(id string) {
	s.mu.Lock()
	var last uint16
	var lastAt string
	if bl := s.boardLogs[id]; bl != nil {
		last, lastAt = bl.last, bl.lastAt.UTC().Format("15:04:05.000")
	}
	s.mu.Unlock()
	var lines []string
	var url string
	for _, g := range s.gws {
		var b boardJSON
		if err := httpJSON(g.base()+"/v1/boards/"+id, &b); err != nil {
			lines = append(lines, fmt.Sprintf("%s: %v", g.name, err))
			continue
		}
		url = b.URL
		lines = append(lines, fmt.Sprintf("%s: owner %s, online %v %s, transports %v; %s", g.name, b.Gateway, b.Online,
			b.OfflineReason, b.Transports, g.metricLines("holo_gateway_cluster_events_")))
	}
	if url != "" {
		var kept struct {
			Seq    uint16 `json:"seq"`
			Lost   int    `json:"lost"`
			Events []struct {
				Event string `json:"event"`
				Seq   uint16 `json:"seq"`
				TMs   int64  `json:"t_ms"`
			} `json:"events"`
		}
		if err := httpJSON(fmt.Sprintf("%s/api/v1/events?after=%d", url, last), &kept); err != nil {
			lines = append(lines, fmt.Sprintf("the board: %v", err))
		} else {
			lines = append(lines, fmt.Sprintf("the board: latest seq %d, %d kept after %d (lost %d): %+v", kept.Seq, len(kept.Events), last, kept.Lost, kept.Events))
		}
	}
	s.problem("drain: board %s (%s): no happening after seq %d (read %s) reached the watch:\n  %s", id, s.names[id], last, lastAt,
		strings.Join(lines, "\n  "))
}

// metricLines returns the gateway's metrics whose names start with
// prefix, on one line ("" when they cannot be read).
func (g *gwProc) metricLines(prefix string) string {
	resp, err := client.Get(g.base() + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// checkBoots: each board booted each rolled-out version once, in order
// (a board restarted by a kill boots what it runs again: consecutive
// boots of one version count once).
func (s *soak) checkBoots() {
	s.mu.Lock()
	versions := slices.Clone(s.versions)
	s.mu.Unlock()
	lists := map[string][]string{}
	for i, bp := range s.bps {
		lists[fmt.Sprintf("LAN board %d", i+1)] = bp.bootList()
	}
	for i, st := range s.sites {
		for j, u := range st.lineURLs {
			lists[fmt.Sprintf("line board %d.%d", i+1, j+1)] = st.bootsOf(u)
		}
	}
	for name, boots := range lists {
		runs := slices.Compact(slices.Clone(boots))
		if len(runs) == 0 || !slices.Equal(runs[1:], versions) {
			s.problem("%s booted %v; the rollouts were of %v", name, boots, versions)
		}
	}
}

// checkBootable: every board answers and runs a confirmed image.
func (s *soak) checkBootable() {
	var urls []string
	for _, bp := range s.bps {
		urls = append(urls, bp.URL())
	}
	for _, st := range s.sites {
		urls = append(urls, st.lineURLs...)
	}
	for _, u := range urls {
		var st struct {
			Session struct{ State string } `json:"session"`
			Slots   []struct {
				Running bool
				State   *string
				App     *struct{ Version string }
			} `json:"slots"`
		}
		if err := httpJSON(u+"/api/v1/ota", &st); err != nil {
			s.problem("board %s: %v", u, err)
			continue
		}
		ok := false
		for _, sl := range st.Slots {
			if sl.Running && sl.App != nil && sl.State != nil && *sl.State == "confirmed" {
				ok = true
			}
		}
		if !ok || st.Session.State == "staged" {
			s.problem("board %s: not running a confirmed image: %+v", u, st)
		}
	}
}

// checkAudit: each gateway's audit log holds every show action it
// answered, by request id, except those answered less than 2 s before a
// kill of that gateway (written in batches: a SIGKILL takes the batch
// not yet written). It returns how many were missing and how many were
// lost to kills.
func (s *soak) checkAudit(since time.Time) (missing, lost int) {
	for _, g := range s.gws {
		ids := map[string]bool{}
		until := time.Now().Add(time.Minute)
		for {
			q := fmt.Sprintf("/v1/audit?since=%s&until=%s&limit=1000", since.UTC().Format(time.RFC3339Nano), until.UTC().Format(time.RFC3339Nano))
			var page []struct {
				Time      time.Time `json:"time"`
				Outcome   string    `json:"outcome"`
				RequestID string    `json:"request_id"`
			}
			code, b := g.rest(s.t, "GET", q, nil)
			if code != 200 {
				s.problem("%s audit: %d %s", g.name, code, b)
				break
			}
			if err := jsonUnmarshal(b, &page); err != nil {
				s.problem("%s audit: %v", g.name, err)
				break
			}
			for _, e := range page {
				ids[e.RequestID] = true
				if e.Outcome == "dropped" {
					s.problem("%s audit: records dropped at %v", g.name, e.Time)
				}
			}
			if len(page) < 1000 {
				break
			}
			until = page[len(page)-1].Time
		}
		s.mu.Lock()
		answered, kills := s.answered[g], s.killsOf[g]
		s.mu.Unlock()
		for _, a := range answered {
			if ids[a.id] {
				continue
			}
			if slices.ContainsFunc(kills, func(k time.Time) bool { return !a.at.After(k) && k.Sub(a.at) < 2*time.Second }) {
				lost++
				continue
			}
			missing++
			if missing <= 10 {
				s.problem("%s audit lacks action %s answered at %v", g.name, a.id, a.at.Format("15:04:05.000"))
			}
		}
	}
	return missing, lost
}

func (s *soak) report(dur time.Duration, seed uint64, took time.Duration, auditMissing, auditLost int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# holofleet cluster soak\n\n")
	fmt.Fprintf(&b, "Run %s for SOAK=%v (took %v), seed %d, %d cores, load %s.\n\n", time.Now().UTC().Format(time.RFC3339), dur,
		took.Round(time.Second), seed, runtime.NumCPU(), loadAverage())
	fmt.Fprintf(&b, "Three gateways on a three-node nats-server engine, %d boards (%d on three RS485 lines, %d LAN board processes each reached by two gateways), Mosquitto. A show of ten timed scene actions a second; rollouts one after another; a SIGKILL and restart every 20-40 s.\n\n",
		s.boards, s.boards-len(s.bps), len(s.bps))
	verdict := "PASS"
	if len(s.problems) > 0 || len(s.gaps) > 0 || len(s.reorders) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "**%s**\n\n", verdict)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	total := 0
	var kinds []string
	for _, k := range []string{"gateway", "board", "mosquitto", "nats"} {
		total += s.killsBy[k]
		kinds = append(kinds, fmt.Sprintf("%s %d", k, s.killsBy[k]))
	}
	fmt.Fprintf(&b, "| kills | %d (%s) |\n", total, strings.Join(kinds, ", "))
	rec := slices.Clone(s.recovery)
	slices.Sort(rec)
	if len(rec) > 0 {
		fmt.Fprintf(&b, "| recovery (kill to every board listed online everywhere and every bridge online) | p50 %v, p99 %v, max %v |\n",
			pct(rec, 0.5).Round(time.Millisecond), pct(rec, 0.99).Round(time.Millisecond), rec[len(rec)-1].Round(time.Millisecond))
	}
	happenings := 0
	for _, bl := range s.boardLogs {
		happenings += bl.happenings
	}
	restarts := 0
	for _, bl := range s.boardLogs {
		restarts += bl.restarts
	}
	fmt.Fprintf(&b, "| events read from /v1/events | %d (%d happenings, %d restarted, %d boards) |\n", s.events, happenings, restarts, len(s.boardLogs))
	fmt.Fprintf(&b, "| happenings lost (gaps) | %d |\n| happenings reordered | %d |\n", len(s.gaps), len(s.reorders))
	fmt.Fprintf(&b, "| event watches silent for 10 s while the show ran (resumed elsewhere) | %d |\n", s.stalls)
	fmt.Fprintf(&b, "| show actions | %d answered, %d failed or not sent (gateway killed, or behind) |\n", s.showOK, s.showFail)
	fmt.Fprintf(&b, "| rollouts | %d: %s |\n", len(s.rolloutResults), strings.Join(s.rolloutResults, ", "))
	fmt.Fprintf(&b, "| audit | %d answered actions missing, %d lost to a kill of their gateway within 2 s |\n", auditMissing, auditLost)
	fmt.Fprintf(&b, "| problems | %d |\n\n", len(s.problems))
	for _, l := range [][]string{s.problems, s.gaps, s.reorders} {
		for i, p := range l {
			if i == 50 {
				fmt.Fprintf(&b, "- ... %d more\n", len(l)-50)
				break
			}
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	// The kills, to place a gap or a reorder (by its event number or
	// the time it was read) after the kill that caused it.
	fmt.Fprintf(&b, "\nKills (time, what, the last event number the watch had read then):\n\n")
	for _, k := range s.kills {
		fmt.Fprintf(&b, "- %s\n", k)
	}
	return b.String()
}
