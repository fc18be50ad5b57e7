package simline

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math/bits"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/clock"
)

func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func newLine(t testing.TB, cfg Config) *Line {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func attach(t testing.TB, l *Line, opts NodeOptions) *Node {
	t.Helper()
	n, err := l.Attach(opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readN reads exactly n bytes or fails after a real-time timeout.
func readN(t testing.TB, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, b); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out reading %d bytes", n)
	}
	return b
}

// fast is a line fast enough that wire time does not matter to a test.
const fast = 10_000_000

func TestEveryNodeHearsEveryByte(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	nodes := make([]*Node, 4)
	for i := range nodes {
		nodes[i] = attach(t, l, NodeOptions{})
	}
	echo := attach(t, l, NodeOptions{Name: "echo", Echo: true})
	all := append(nodes, echo)
	for i, sender := range all {
		msg := []byte{0x00, byte(i), 0xFF, 0x0A, byte(0x80 + i), 0x00}
		if n, err := sender.Write(msg); n != len(msg) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		for j, r := range all {
			if r == sender && !r.echo {
				continue
			}
			if diff := cmp.Diff(readN(t, r, len(msg)), msg); diff != "" {
				t.Errorf("node %d from %d (-got +want)\n%s", j, i, diff)
			}
		}
		for j, r := range nodes {
			if r.Buffered() != 0 {
				t.Errorf("node %d has %d extra bytes after message %d", j, r.Buffered(), i)
			}
		}
	}
	st := l.Stats()
	if st.Nodes != 5 || st.Bytes != 30 || st.Frames != 5 || st.Collisions != 0 || st.Faults() != 0 {
		t.Errorf("stats %+v", st)
	}
	if ns := nodes[0].Stats(); ns.Sent != 6 || ns.Received != 24 {
		t.Errorf("node stats %+v", ns)
	}
}

// driveFake advances the fake clock by step whenever a writer waits, until
// done is closed.
func driveFake(t *testing.T, fc *clock.Fake, step time.Duration, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("writer never finished")
		}
		if fc.WaitForWaiters(1, 2*time.Millisecond) {
			fc.Advance(step)
		}
	}
}

func TestWireTimeFakeClock(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	l := newLine(t, Config{Baud: 10_000, Clock: fc}) // 1 ms a byte
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{})
	t0 := fc.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Write([]byte("hello"))
	}()
	if !fc.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("writer did not arm its timer")
	}
	if b.Buffered() != 0 {
		t.Fatal("bytes arrived before their wire time")
	}
	fc.Advance(2500 * time.Microsecond)
	// Byte 0 ends at 1 ms, byte 1 at 2 ms: two bytes are due.
	if got := readN(t, b, 2); string(got) != "he" {
		t.Fatalf("after 2.5ms got %q", got)
	}
	driveFake(t, fc, 500*time.Microsecond, done)
	if got := readN(t, b, 3); string(got) != "llo" {
		t.Fatalf("rest %q", got)
	}
	if el := fc.Since(t0); el != 5*time.Millisecond {
		t.Errorf("write took %v of fake time, want 5ms", el)
	}
}

func TestWireTimeRealLowerBound(t *testing.T) {
	for _, baud := range []int{115200, 1_000_000} {
		l := newLine(t, Config{Baud: baud})
		a := attach(t, l, NodeOptions{})
		b := attach(t, l, NodeOptions{})
		msg := bytes.Repeat([]byte{0x55}, 200)
		start := time.Now()
		go a.Write(msg)
		readN(t, b, len(msg))
		if el, want := time.Since(start), l.WireTime(len(msg)); el < want {
			t.Errorf("%d baud: 200 bytes arrived after %v, before their wire time %v", baud, el, want)
		}
	}
}

func TestBytesDue(t *testing.T) {
	for _, tc := range []struct {
		elapsed time.Duration
		n, baud int
		want    int
	}{
		{0, 10, 10_000, 0},
		{999 * time.Microsecond, 10, 10_000, 0},
		{time.Millisecond, 10, 10_000, 1},
		{9999 * time.Microsecond, 10, 10_000, 9},
		{time.Hour, 10, 10_000, 10},
		{-time.Second, 10, 10_000, 0},
		{86805, 5, 115200, 1}, // 86805.5 ns a byte, truncated to whole ns
		{86804, 5, 115200, 0},
		{173611, 5, 115200, 2},
		{173610, 5, 115200, 1},
	} {
		if got := bytesDue(tc.elapsed, tc.n, tc.baud); got != tc.want {
			t.Errorf("bytesDue(%v, %d, %d) = %d, want %d", tc.elapsed, tc.n, tc.baud, got, tc.want)
		}
	}
}

func TestCollisionCorruptsBoth(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	l := newLine(t, Config{Baud: 10_000, Clock: fc, Seed: 7}) // 1 ms a byte
	a := attach(t, l, NodeOptions{Name: "a", Echo: true})
	b := attach(t, l, NodeOptions{Name: "b", Echo: true})
	c := attach(t, l, NodeOptions{Name: "c"})
	msgA := h("11 22 33 44")
	msgB := h("aa bb cc dd")

	doneA := make(chan struct{})
	go func() { defer close(doneA); a.Write(msgA) }()
	fc.WaitForWaiters(1, 5*time.Second)
	fc.Advance(2 * time.Millisecond) // A's bytes 0 and 1 go out clean
	if got := readN(t, c, 2); !bytes.Equal(got, msgA[:2]) {
		t.Fatalf("before the collision c got % x", got)
	}
	// B starts at 2 ms, overlapping A's bytes 2 and 3 (2-4 ms) with its
	// bytes 0 and 1; its bytes 2 and 3 (4-6 ms) are alone on the wire.
	doneB := make(chan struct{})
	go func() { defer close(doneB); b.Write(msgB) }()
	// Step the clock only once every running writer is waiting, so bytes
	// reach c in the order of their wire times.
	step := func(waiters int, done <-chan struct{}) {
		t.Helper()
		if !fc.WaitForWaiters(waiters, 5*time.Second) {
			t.Fatalf("at %v: fewer than %d writers waiting", fc.Now(), waiters)
		}
		fc.Advance(time.Millisecond)
		if done != nil {
			<-done
		}
	}
	step(2, nil)   // 3 ms
	step(2, doneA) // 4 ms: A is through
	step(1, nil)   // 5 ms
	step(1, doneB) // 6 ms: B is through

	got := readN(t, c, 6)
	if st := l.Stats(); st.Collisions != 4 {
		t.Errorf("collisions = %d, want 4", st.Collisions)
	}
	if a.Stats().Collisions != 2 || b.Stats().Collisions != 2 {
		t.Errorf("per-node collisions a=%d b=%d", a.Stats().Collisions, b.Stats().Collisions)
	}
	// The last two bytes c heard are B's clean tail.
	if !bytes.Equal(got[4:], msgB[2:]) {
		t.Errorf("tail % x, want % x", got[4:], msgB[2:])
	}
	// The four in the middle are all garbage: none is a byte either sender
	// meant at that point.
	for _, g := range got[:4] {
		if bytes.IndexByte(h("33 44 aa bb"), g) >= 0 {
			t.Errorf("collided byte %02x came through unchanged (% x)", g, got)
		}
	}
	// Each sender, listening with echo, finds its own bytes differ.
	echoA := readN(t, a, 4+4) // its own four and B's four
	if bytes.Equal(echoA[:4], msgA) || !bytes.Equal(echoA[:2], msgA[:2]) {
		t.Errorf("A's echo % x does not show the collision", echoA)
	}
}

func TestCollisionNoneWhenSequential(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{})
	c := attach(t, l, NodeOptions{})
	a.Write([]byte("ping"))
	b.Write([]byte("pong"))
	if got := readN(t, c, 8); string(got) != "pingpong" {
		t.Fatalf("got %q", got)
	}
	if st := l.Stats(); st.Collisions != 0 {
		t.Fatalf("collisions %d", st.Collisions)
	}
}

// faultRun sends msg through a line with faults f and returns what a
// receiver got and the stats.
func faultRun(t *testing.T, seed uint64, f Faults, msg []byte) ([]byte, Stats) {
	t.Helper()
	l := newLine(t, Config{Baud: fast, Seed: seed, Faults: f})
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{})
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	want := len(msg) - int(st.Dropped) + int(st.NoiseBytes)
	got := readN(t, b, want)
	if b.Buffered() != 0 {
		t.Fatalf("%d unexpected extra bytes", b.Buffered())
	}
	return got, st
}

func TestFaults(t *testing.T) {
	msg := bytes.Repeat(h("00 01 7f 80 ff 0a"), 200) // 1200 bytes
	tests := []struct {
		name  string
		f     Faults
		check func(t *testing.T, got []byte, st Stats)
	}{
		{"none", Faults{}, func(t *testing.T, got []byte, st Stats) {
			if !bytes.Equal(got, msg) || st.Faults() != 0 {
				t.Errorf("clean line changed bytes or counted faults: %+v", st)
			}
		}},
		{"flip every byte", Faults{FlipRate: 1}, func(t *testing.T, got []byte, st Stats) {
			if st.BitFlips != int64(len(msg)) {
				t.Errorf("flips %d", st.BitFlips)
			}
			for i := range msg {
				if d := bits.OnesCount8(got[i] ^ msg[i]); d != 1 {
					t.Fatalf("byte %d differs in %d bits", i, d)
				}
			}
		}},
		{"flip some", Faults{FlipRate: 0.1}, func(t *testing.T, got []byte, st Stats) {
			diff := 0
			for i := range msg {
				if got[i] != msg[i] {
					diff++
				}
			}
			if int64(diff) != st.BitFlips || diff < 60 || diff > 190 {
				t.Errorf("%d bytes changed, %d flips counted, want about 120", diff, st.BitFlips)
			}
		}},
		{"drop some", Faults{DropRate: 0.25}, func(t *testing.T, got []byte, st Stats) {
			if st.Dropped < 200 || st.Dropped > 400 {
				t.Errorf("dropped %d of 1200, want about 300", st.Dropped)
			}
			if !isSubsequence(got, msg) {
				t.Error("received bytes are not the sent ones less some")
			}
		}},
		{"drop all", Faults{DropRate: 1}, func(t *testing.T, got []byte, st Stats) {
			if len(got) != 0 || st.Dropped != int64(len(msg)) {
				t.Errorf("got %d bytes, dropped %d", len(got), st.Dropped)
			}
		}},
		{"noise", Faults{NoiseRate: 0.05, NoiseMaxBurst: 4}, func(t *testing.T, got []byte, st Stats) {
			if st.NoiseBursts < 20 || st.NoiseBursts > 110 || st.NoiseBytes < st.NoiseBursts || st.NoiseBytes > 4*st.NoiseBursts {
				t.Errorf("bursts %d bytes %d", st.NoiseBursts, st.NoiseBytes)
			}
			if !isSubsequence(msg, got) {
				t.Error("sent bytes are not all in what was received")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, st := faultRun(t, 42, tc.f, msg)
			tc.check(t, got, st)
			// Same seed, same faults: the same bytes.
			again, st2 := faultRun(t, 42, tc.f, msg)
			if !bytes.Equal(got, again) || st != st2 {
				t.Error("the same seed gave a different run")
			}
			if tc.f != (Faults{}) {
				other, _ := faultRun(t, 43, tc.f, msg)
				if bytes.Equal(got, other) && tc.f.DropRate != 1 {
					t.Error("another seed gave the same run")
				}
			}
		})
	}
}

// isSubsequence reports whether a's bytes appear in b in order.
func isSubsequence(a, b []byte) bool {
	i := 0
	for _, c := range b {
		if i < len(a) && a[i] == c {
			i++
		}
	}
	return i == len(a)
}

func TestSetFaultsAndConfigErrors(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	for _, f := range []Faults{{FlipRate: -0.1}, {DropRate: 1.5}, {NoiseRate: 2}, {NoiseMaxBurst: -1}} {
		if err := l.SetFaults(f); !errors.Is(err, ErrConfig) {
			t.Errorf("SetFaults(%+v) = %v", f, err)
		}
		if _, err := New(Config{Faults: f}); !errors.Is(err, ErrConfig) {
			t.Errorf("New with %+v = %v", f, err)
		}
	}
	if _, err := New(Config{Baud: -1}); !errors.Is(err, ErrConfig) {
		t.Errorf("negative baud: %v", err)
	}
	if _, err := l.Attach(NodeOptions{RxBuffer: -1}); !errors.Is(err, ErrConfig) {
		t.Errorf("negative buffer: %v", err)
	}
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{})
	if err := l.SetFaults(Faults{DropRate: 1}); err != nil {
		t.Fatal(err)
	}
	a.Write([]byte{1, 2, 3})
	l.SetFaults(Faults{})
	a.Write([]byte{4})
	if got := readN(t, b, 1); got[0] != 4 {
		t.Fatalf("got %x", got)
	}
}

func TestSilentNode(t *testing.T) {
	l := newLine(t, Config{Baud: fast, Silent: []string{"mute"}})
	m := attach(t, l, NodeOptions{Name: "mute"})
	s := attach(t, l, NodeOptions{Name: "s", Silent: true})
	o := attach(t, l, NodeOptions{Name: "o"})
	for _, n := range []*Node{m, s} {
		if k, err := n.Write([]byte("nobody hears")); k != 12 || err != nil {
			t.Fatalf("silent Write = %d, %v", k, err)
		}
	}
	if o.Buffered() != 0 {
		t.Fatalf("a silent node's bytes reached the line: %d", o.Buffered())
	}
	// A silent node still hears the line.
	o.Write([]byte("hi"))
	if got := readN(t, m, 2); string(got) != "hi" {
		t.Fatalf("silent node heard %q", got)
	}
	readN(t, s, 2)
	m.SetSilent(false)
	m.Write([]byte("back"))
	if got := readN(t, o, 4); string(got) != "back" {
		t.Fatalf("after unsilencing %q", got)
	}
	st := l.Stats()
	if st.Silenced != 24 || st.Bytes != 6 {
		t.Errorf("stats %+v", st)
	}
}

func TestSilentNodeCausesNoCollision(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	l := newLine(t, Config{Baud: 10_000, Clock: fc})
	s := attach(t, l, NodeOptions{Silent: true})
	a := attach(t, l, NodeOptions{})
	r := attach(t, l, NodeOptions{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.Write([]byte("xxxx")) }()
	go func() { defer wg.Done(); a.Write([]byte("data")) }()
	fc.WaitForWaiters(2, 5*time.Second)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	driveFake(t, fc, time.Millisecond, done)
	if got := readN(t, r, 4); string(got) != "data" {
		t.Fatalf("got %q", got)
	}
	if c := l.Stats().Collisions; c != 0 {
		t.Fatalf("collisions %d", c)
	}
}

func TestInjectNoise(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{})
	l.InjectNoise(h("de ad be ef"))
	for _, n := range []*Node{a, b} {
		if diff := cmp.Diff(readN(t, n, 4), h("de ad be ef")); diff != "" {
			t.Errorf("(-got +want)\n%s", diff)
		}
	}
	if st := l.Stats(); st.NoiseBursts != 1 || st.NoiseBytes != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestFrameAndLineCounting(t *testing.T) {
	for _, tc := range []struct {
		name          string
		wire          []byte
		frames, lines int64
	}{
		{"one frame", h("00 05 01 02 03 04 00"), 1, 0},
		{"frame with 0a inside", h("00 03 0a 0a 00"), 1, 0},
		{"back to back frames", h("00 02 01 00 00 02 02 00"), 2, 0},
		{"shared delimiter", h("00 02 01 00 02 02 00"), 1, 0}, // the second run lacks its opening 0x00
		{"empty frames", h("00 00 00"), 0, 0},
		{"json line", []byte("@1 GET /info\n"), 0, 1},
		{"crlf line", []byte("@1 GET /info\r\n"), 0, 1},
		{"empty lines", []byte("\n\n"), 0, 0},
		{"frame then line", append(h("00 02 01 00"), "@2 200\n"...), 1, 1},
		{"line cut by frame", append([]byte("@1 GE"), h("00 02 01 00")...), 1, 0},
		{"unterminated", h("00 01 02"), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLine(t, Config{Baud: fast})
			a := attach(t, l, NodeOptions{})
			a.Write(tc.wire)
			st := l.Stats()
			if diff := cmp.Diff([2]int64{st.Frames, st.Lines}, [2]int64{tc.frames, tc.lines}); diff != "" {
				t.Errorf("[frames lines] (-got +want)\n%s", diff)
			}
		})
	}
}

func TestOverrun(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{RxBuffer: 4})
	a.Write([]byte("0123456789"))
	if got := readN(t, b, 4); string(got) != "0123" {
		t.Fatalf("got %q", got)
	}
	if ns := b.Stats(); ns.Overruns != 6 || ns.Received != 4 {
		t.Errorf("node stats %+v", ns)
	}
	if st := l.Stats(); st.Overruns != 6 {
		t.Errorf("line overruns %d", st.Overruns)
	}
	b.Close()
	if st := l.Stats(); st.Overruns != 6 || st.Nodes != 1 {
		t.Errorf("after detaching: %+v", st)
	}
}

func TestCloseUnblocks(t *testing.T) {
	before := runtime.NumGoroutine()
	fc := clock.NewFake(time.Unix(0, 0))
	l, err := New(Config{Baud: 9600, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	a := attach(t, l, NodeOptions{})
	b := attach(t, l, NodeOptions{})
	c := attach(t, l, NodeOptions{})
	wErr := make(chan error, 1)
	go func() { _, err := a.Write(make([]byte, 100)); wErr <- err }()
	rErr := make(chan error, 1)
	go func() { _, err := b.Read(make([]byte, 1)); rErr <- err }()
	rErr2 := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); rErr2 <- err }()
	fc.WaitForWaiters(1, 5*time.Second)
	a.Close() // stops its own Write
	b.Close() // stops its own Read
	l.Close() // stops everyone else
	for name, ch := range map[string]chan error{"write": wErr, "read": rErr, "line read": rErr2} {
		select {
		case err := <-ch:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s: %v, want ErrClosed", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s not unblocked by Close", name)
		}
	}
	if _, err := l.Attach(NodeOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Attach after Close: %v", err)
	}
	if _, err := a.Write([]byte{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	waitGoroutines(t, before)
}

func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines leaked: %d > %d\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
