package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/osc"
)

var oscLine = regexp.MustCompile(`osc:\s+udp\+tcp (\S+)`)

// needLiblo returns the paths of oscsend and oscdump (Debian's
// liblo-tools), skipping the test without them unless CI is set.
func needLiblo(t *testing.T) (string, string) {
	t.Helper()
	send, err1 := exec.LookPath("oscsend")
	dump, err2 := exec.LookPath("oscdump")
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("oscsend/oscdump missing: install liblo-tools")
		}
		t.Skip("oscsend/oscdump (liblo-tools) not installed: apt-get install liblo-tools")
	}
	return send, dump
}

// boardLEDs reads a board's /leds through the gateway's fleet.
func boardLEDs(t *testing.T, base, id string) map[string]any {
	t.Helper()
	resp, err := http.Post(base+"/v1/boards/"+id+"/call", "application/json", strings.NewReader(`{"method":"GET","path":"/leds"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Body json.RawMessage `json:"body"`
	}
	var st map[string]any
	if err := json.Unmarshal(b, &r); err != nil || json.Unmarshal(r.Body, &st) != nil {
		// The body may be carried as a string.
		var rs struct {
			Body string `json:"body"`
		}
		if json.Unmarshal(b, &rs) != nil || json.Unmarshal([]byte(rs.Body), &st) != nil {
			t.Fatalf("GET /leds: %s", b)
		}
	}
	return st
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestOSCDemo drives the demo over OSC with liblo's oscsend, reads replies
// and feedback with oscdump, and sends SLIP over TCP and a timed bundle.
func TestOSCDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	oscsend, oscdump := needLiblo(t)
	base, out := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "1", "--mqtt", noBroker, "--osc", "127.0.0.1:0")
	m := oscLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no OSC line in the banner:\n%s", out.String())
	}
	oscAddr := m[1]
	host, port, _ := net.SplitHostPort(oscAddr)
	var ids []string
	for _, b := range waitOnline(t, base, 2, nil) {
		ids = append(ids, b.ID)
	}

	// oscdump listens where replies and feedback go.
	dumpPort := freeUDPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	dump := exec.CommandContext(ctx, oscdump, "-L", strconv.Itoa(dumpPort))
	stdout, _ := dump.StdoutPipe()
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = dump.Wait() }()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			// oscdump starts each line with the time tag (hex.hex).
			if i := strings.IndexByte(l, ' '); i > 0 && !strings.HasPrefix(l, "/") {
				l = l[i+1:]
			}
			lines <- l
		}
		close(lines)
	}()
	// within returns the first line match takes within d, or "".
	within := func(what string, d time.Duration, match func(string) bool) string {
		t.Helper()
		timeout := time.After(d)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("oscdump ended before %s", what)
				}
				if match(l) {
					return l
				}
			case <-timeout:
				return ""
			}
		}
	}
	expect := func(what string, match func(string) bool) string {
		t.Helper()
		l := within(what, 10*time.Second, match)
		if l == "" {
			t.Fatalf("oscdump saw no %s", what)
		}
		return l
	}
	send := func(args ...string) {
		t.Helper()
		cmd := exec.Command(oscsend, append([]string{host, port}, args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("oscsend %v: %v %s", args, err, b)
		}
	}
	// oscdump binds its port in its own time, and a reply sent before is
	// lost: ask until one reaches it (a later repeat is skipped below).
	isReplyPort := func(l string) bool { return strings.HasPrefix(l, "/reply/holo/replyPort s ") }
	for deadline := time.Now().Add(10 * time.Second); ; {
		send("/holo/replyPort", "i", strconv.Itoa(dumpPort))
		if within("the replyPort reply", 200*time.Millisecond, isReplyPort) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("oscdump saw no replyPort reply")
		}
	}

	send("/holo/group/1/leds/colour", "s", "#ff0000")
	l := expect("the leds reply", func(l string) bool { return strings.HasPrefix(l, "/reply/holo/group/1/leds/colour s ") })
	if !strings.Contains(l, `\"status\":\"ok\"`) && !strings.Contains(l, `"status":"ok"`) {
		t.Fatalf("reply line: %s", l)
	}
	for _, id := range ids {
		waitFor(t, id+" red", 10*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#ff0000" })
	}

	// A board by pattern, with the JSON body of PATCH /leds.
	send("/holo/board/*/leds", "s", `{"colour":"#00ff00"}`)
	expect("the JSON leds reply", func(l string) bool { return strings.HasPrefix(l, "/reply/holo/board/*/leds s ") })
	for _, id := range ids {
		waitFor(t, id+" green", 10*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#00ff00" })
	}

	// A bad body is refused and changes nothing.
	send("/holo/board/"+ids[0]+"/leds/brightness", "i", "500")
	l = expect("the refusal", func(l string) bool { return strings.HasPrefix(l, "/reply/holo/board/"+ids[0]+"/leds/brightness") })
	if !strings.Contains(l, "error") {
		t.Fatalf("refusal: %s", l)
	}

	// Feedback: subscribe, change a board, see its state.
	send("/holo/subscribe", "s", "/holo/board/"+ids[1])
	expect("the subscribe reply", func(l string) bool { return strings.HasPrefix(l, "/reply/holo/subscribe s ") })
	send("/holo/board/"+ids[1]+"/leds/colour", "s", "#0000ff")
	expect("leds feedback", func(l string) bool {
		return strings.HasPrefix(l, "/holo/board/"+ids[1]+"/leds s ") && strings.Contains(l, "#0000ff")
	})
	send("/holo/unsubscribe")

	// TCP with SLIP framing: a client written here.
	conn, err := net.Dial("tcp", oscAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pkt, _ := osc.Encode(&osc.Message{Address: "/holo/board/" + ids[0] + "/leds/brightness", Args: []any{float32(0.5)}})
	if _, err := conn.Write(osc.AppendFrame(nil, osc.FramingSLIP, pkt)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, err := osc.NewStreamReader(conn).Next()
	if err != nil {
		t.Fatal(err)
	}
	p, err := osc.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	rm := p.(*osc.Message)
	if rm.Address != "/reply/holo/board/"+ids[0]+"/leds/brightness" || !strings.Contains(rm.Args[0].(string), `"status":"ok"`) {
		t.Fatalf("TCP reply %s %v", rm.Address, rm.Args)
	}
	if b := boardLEDs(t, base, ids[0])["brightness"]; b != float64(50) {
		t.Fatalf("brightness %v after 0.5", b)
	}

	// A bundle 200 ms ahead applies no earlier.
	uc, err := net.Dial("udp", oscAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	sent := time.Now()
	bu, _ := osc.Encode(&osc.Bundle{Time: osc.TimetagOf(sent.Add(200 * time.Millisecond)),
		Elements: []osc.Packet{&osc.Message{Address: "/holo/group/1/leds/colour", Args: []any{"#123456"}}}})
	if _, err := uc.Write(bu); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bundle's colour", 10*time.Second, func() bool { return boardLEDs(t, base, ids[0])["colour"] == "#123456" })
	if d := time.Since(sent); d < 200*time.Millisecond {
		t.Fatalf("the bundle applied after %v, before its time tag", d)
	}
}

// TestOSCFlags: bad --osc and --osc-access values are usage errors (exit
// 2) before anything starts.
func TestOSCFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--osc-access", "admin"},
		{"--osc-access", ""},
		{"--osc-access", "SHOW"},
		{"--osc", "127.0.0.1:0", "--osc-access", "write"},
		{"--osc", "no-port"},
		{"--osc", ""},
		{"--osc", "127.0.0.1:99999"},
		{"--osc", "127.0.0.1:-1"},
		{"--osc", "127.0.0.1:osc"},
		{"--osc", "127.0.0.1:53000:1"},
	} {
		var out, errb syncBuffer
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		start := time.Now()
		code := run(ctx, append([]string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-mqtt"}, args...), &out, &errb)
		cancel()
		if code != 2 || errb.String() == "" {
			t.Errorf("%q: exit %d %s", args, code, errb.String())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q: took %v to refuse", args, d)
		}
		if strings.Contains(out.String(), "API:") || strings.Contains(out.String(), "osc:") {
			t.Errorf("%q: started before refusing:\n%s", args, out.String())
		}
	}
}
