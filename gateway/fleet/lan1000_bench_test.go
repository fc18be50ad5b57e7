package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/registry"
	"github.com/holofleet/holofleet/store"
)

// BenchmarkLAN1000 is the scale check of the LAN path: FLEET_LAN_BOARDS
// fleet-mode boards (default 1000, no line) in this process, and a gateway
// core (bbolt registry, LAN driver holding one event stream per board)
// following all of them. Once every board is online in the fleet (within
// 3 minutes) and 3 s more have passed, it reports per board, at idle:
//
//	boards-B/board         heap+stacks of the boards alone (measured first)
//	boards-stream-B/board  what the boards add to serve one event stream
//	                       each, measured with bare connections that read
//	                       nothing, then closed
//	gateway-B/board        what adding the gateway added, less the boards'
//	                       stream share: the gateway's own cost of a board
//	total-B/board          all of it, against the 300 KB target
//	gateway-goroutines/board (both ends of the streams), goroutines/board
//	boards-cpu-%/board     process CPU over an idle window (FLEET_LAN_IDLE,
//	                       default 10 s) with the boards alone, in percent
//	                       of one core per board
//	cpu-%/board            the same with the gateway following them
//
// Memory is HeapInuse+StackInuse after two GCs. The 3 s include the call
// connections the start-up left idle (net/http keeps up to 100 for 90 s).
func BenchmarkLAN1000(b *testing.B) {
	n := envInt(b, "FLEET_LAN_BOARDS", 1000)
	idle := 10 * time.Second
	if s := os.Getenv("FLEET_LAN_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		idle = d
	}
	raiseFiles(b, n, 8*n+1024)
	b.ReportAllocs()
	for b.Loop() { // once: ns/op is the whole scenario
		lan1000(b, n, idle)
	}
}

func lan1000(b *testing.B, n int, idle time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := b.TempDir()
	settle()
	memBase, goBase := memInUse(), runtime.NumGoroutine()

	// The boards alone.
	t0 := time.Now()
	fm, err := fleetmode.Start(ctx, fleetmode.Options{N: n, BaseDir: filepath.Join(dir, "boards"), Parallel: 2 * runtime.GOMAXPROCS(0)})
	if err != nil {
		b.Fatal(err)
	}
	defer fm.Stop()
	b.Logf("%d boards started in %v", n, time.Since(t0).Round(time.Millisecond))
	settle()
	memBoards, goBoards := memInUse(), runtime.NumGoroutine()
	cpuBoards := idleCPU(idle)

	// The boards' side of one event stream each, held by bare connections
	// that send the request and read nothing (a few hundred bytes each on
	// this side): what a board pays to be followed, whoever follows it.
	conns := openStreams(b, fm.Boards())
	settle()
	memStreams := memInUse()
	for _, c := range conns {
		c.Close()
	}
	for t := time.Now(); runtime.NumGoroutine() > goBoards; time.Sleep(20 * time.Millisecond) {
		if time.Since(t) > 30*time.Second {
			b.Fatalf("the boards still hold the bare streams: %d goroutines, %d before", runtime.NumGoroutine(), goBoards)
		}
	}

	// The gateway core following every board over the LAN.
	db, err := store.Open(filepath.Join(dir, "gateway.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	reg, err := registry.Open(db)
	if err != nil {
		b.Fatal(err)
	}
	ld := lan.New(lan.Options{})
	for _, in := range fm.Boards() {
		if err := ld.Add(in.URL, ""); err != nil {
			b.Fatal(err)
		}
	}
	f := fleet.New(fleet.Options{Registry: reg, Drivers: []fleet.Driver{ld}})
	gctx, gcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	t0 = time.Now()
	go func() { done <- f.Run(gctx) }()
	defer func() { gcancel(); <-done }()
	deadline := t0.Add(3 * time.Minute)
	for st := f.Stats(); st.Online < n; st = f.Stats() {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d boards online after %v", st.Online, n, time.Since(t0).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Logf("%d boards online in the fleet in %v", n, time.Since(t0).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // the groups reads and state re-reads finish
	settle()
	memAll, goAll := memInUse(), runtime.NumGoroutine()
	cpuAll := idleCPU(idle)
	if st := f.Stats(); st.Online != n || st.Dropped != 0 {
		b.Errorf("after idling: %+v online, %d dropped", st.Online, st.Dropped)
	}

	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(memBoards-memBase), "boards-B/board")
	b.ReportMetric(per(memStreams-memBoards), "boards-stream-B/board")
	b.ReportMetric(per(memAll-memBoards-(memStreams-memBoards)), "gateway-B/board")
	b.ReportMetric(per(memAll-memBase), "total-B/board")
	b.ReportMetric(per(int64(goAll-goBoards)), "gateway-goroutines/board")
	b.ReportMetric(per(int64(goAll-goBase)), "goroutines/board")
	b.ReportMetric(100*cpuBoards/float64(n), "boards-cpu-%/board")
	b.ReportMetric(100*cpuAll/float64(n), "cpu-%/board")
}

// openStreams opens an event stream to every board on a bare connection
// and waits for each board to answer with the stream's headers.
func openStreams(b *testing.B, boards []fleetmode.Info) []net.Conn {
	var conns []net.Conn
	for _, in := range boards {
		host := strings.TrimPrefix(in.URL, "http://")
		c, err := net.Dial("tcp", host)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", host); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 12)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			b.Fatalf("bare stream: %q %v", buf, err)
		}
	}
	return conns
}

// idleCPU is the process's CPU time over d, in cores (1 = one core busy).
func idleCPU(d time.Duration) float64 {
	before, t0 := cpuTime(), time.Now()
	time.Sleep(d)
	return float64(cpuTime()-before) / float64(time.Since(t0))
}

// cpuTime is the process's user plus system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle lets start-up garbage and idle connections go.
func settle() {
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
}

func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

// raiseFiles lifts the soft open-files limit towards want (each board holds
// a listener, its stores and its side of the stream; the gateway the other
// side and a few idle call connections).
func raiseFiles(b *testing.B, n, want int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Logf("RLIMIT_NOFILE: %v", err)
		return
	}
	if lim.Cur >= uint64(want) {
		return
	}
	lim.Cur = min(uint64(want), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Logf("raising RLIMIT_NOFILE to %d: %v", lim.Cur, err)
	}
	if lim.Cur < uint64(want) {
		b.Logf("open files limited to %d; %d boards may want %d", lim.Cur, n, want)
	}
}
