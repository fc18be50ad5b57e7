package fleetmode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/link"
)

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func newLine(t testing.TB) *simline.Line {
	t.Helper()
	line, err := simline.New(simline.Config{Baud: 115200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	return line
}

func TestEightBoardsOnALine(t *testing.T) {
	line := newLine(t)
	dir := t.TempDir()
	groups := func(i int) []int { return []int{i%2 + 1} }
	f, err := Start(context.Background(), Options{N: 8, BaseDir: dir, Line: line, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	infos := f.Boards()
	if len(infos) != 8 {
		t.Fatalf("%d boards", len(infos))
	}
	ids := map[string]bool{}
	for i, in := range infos {
		var info struct {
			ID string `json:"id"`
		}
		getJSON(t, in.URL+"/api/v1/info", &info)
		if info.ID != in.ID || ids[in.ID] {
			t.Errorf("board %d: /info id %q, Boards says %q (or a duplicate)", i, info.ID, in.ID)
		}
		ids[in.ID] = true
		var st link.State
		getJSON(t, in.URL+"/api/v1/link", &st)
		got := []any{st.Running.Mode, st.Running.Address, st.Running.Groups, st.Running.Baud}
		want := []any{link.ModeRS485, i + 1, groups(i), 115200}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("board %d link (-got +want)\n%s", i, diff)
		}
		if in.Address != i+1 || !in.Running || !cmp.Equal(in.Groups, groups(i)) {
			t.Errorf("board %d info %+v", i, in)
		}
	}

	// The line reaches every board by its address.
	master, err := line.Attach(simline.NodeOptions{Name: "master"})
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(master)
	for i, in := range infos {
		if _, err := fmt.Fprintf(master, "@%d GET /info\n", i+1); err != nil {
			t.Fatal(err)
		}
		rep := readReply(t, master, rd)
		if rep.Status != 200 || !strings.Contains(string(rep.Body), in.ID) {
			t.Errorf("board %d over the line: %d %s", i+1, rep.Status, rep.Body)
		}
	}

	// Power off and on: the same board (identity, address, URL) comes back.
	if err := f.PowerOff(2); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(infos[2].URL + "/api/v1/info"); err == nil {
		t.Error("a powered-off board still answers")
	}
	if err := f.PowerOn(2); err != nil {
		t.Fatal(err)
	}
	again := f.Boards()[2]
	if again.ID != infos[2].ID || again.Address != 3 || !again.Running {
		t.Errorf("after power-on: %+v, was %+v", again, infos[2])
	}
	var info struct {
		ID string `json:"id"`
	}
	getJSON(t, again.URL+"/api/v1/info", &info)
	if info.ID != infos[2].ID {
		t.Errorf("after power-on the board is %q", info.ID)
	}
	if err := f.Restart(2); err != nil {
		t.Fatal(err)
	}
	if err := f.PowerOn(99); !errors.Is(err, ErrIndex) {
		t.Errorf("PowerOn(99): %v", err)
	}
	if err := f.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := f.PowerOn(1); !errors.Is(err, ErrStopped) {
		t.Errorf("PowerOn after Stop: %v", err)
	}

	// A second start on the same directory keeps the identities.
	f2, err := Start(context.Background(), Options{N: 8, BaseDir: dir, Line: line, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Stop()
	for i, in := range f2.Boards() {
		if in.ID != infos[i].ID {
			t.Errorf("board %d came back as %q, was %q", i, in.ID, infos[i].ID)
		}
	}
}

// readReply reads lines from the master's side until a reply line.
func readReply(t testing.TB, master *simline.Node, rd *bufio.Reader) jsonline.Reply {
	t.Helper()
	done := make(chan jsonline.Reply, 1)
	go func() {
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				close(done)
				return
			}
			if jsonline.ClassifyFromBoard(line) != jsonline.KindReply {
				continue
			}
			rep, err := jsonline.ParseReply(line)
			if err != nil {
				continue
			}
			done <- rep
			return
		}
	}()
	select {
	case rep, ok := <-done:
		if !ok {
			t.Fatal("line closed")
		}
		return rep
	case <-time.After(5 * time.Second):
		master.Close()
		t.Fatal("no reply over the line")
	}
	return jsonline.Reply{}
}

func TestBadOptions(t *testing.T) {
	line := newLine(t)
	for _, o := range []Options{
		{N: 0, BaseDir: t.TempDir()},
		{N: 1},
		{N: 224, BaseDir: t.TempDir(), Line: line},
		{N: 1, BaseDir: t.TempDir(), Line: line, Groups: func(int) []int { return []int{32} }},
	} {
		if f, err := Start(context.Background(), o); !errors.Is(err, ErrOptions) {
			if f != nil {
				f.Stop()
			}
			t.Errorf("Start(%+v) = %v, want ErrOptions", o, err)
		}
	}
}

// BenchmarkIdleMemory starts FLEETMODE_BOARDS boards (default 100) on a
// line and reports the heap and stacks they hold at idle, per board.
func BenchmarkIdleMemory(b *testing.B) {
	n := 100
	if s := os.Getenv("FLEETMODE_BOARDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		var line *simline.Line
		if n <= MaxOnLine {
			line = newLine(b)
		}
		before := memInUse()
		goBefore := runtime.NumGoroutine()
		b.StartTimer()
		f, err := Start(context.Background(), Options{N: n, BaseDir: b.TempDir(), Line: line,
			Groups: func(i int) []int { return []int{i%4 + 1} }})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(500 * time.Millisecond) // let start-up garbage go
		after := memInUse()
		b.ReportMetric(float64(after-before)/float64(n), "B/board")
		b.ReportMetric(float64(runtime.NumGoroutine()-goBefore)/float64(n), "goroutines/board")
		if err := f.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}
