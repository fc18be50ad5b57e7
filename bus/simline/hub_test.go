package simline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// protoVectors is the shared table of hub messages with their bytes.
var protoVectors = []struct {
	name string
	msg  Msg
	wire []byte
}{
	{"hello", Msg{Type: MsgHello, Version: 1, Flags: FlagEcho, Name: "b1"},
		h("05000000 01 01 01 6231")},
	{"hello no name", Msg{Type: MsgHello, Version: 1, Flags: FlagEcho | FlagSilent},
		h("03000000 01 01 03")},
	{"welcome", Msg{Type: MsgWelcome, Version: 1, Baud: 115200},
		h("06000000 02 01 00c20100")},
	{"send", Msg{Type: MsgSend, Data: h("00 0301 00")},
		h("05000000 10 00030100")},
	{"sent", Msg{Type: MsgSent, Count: 4, Time: 0x0102030405060708},
		h("0d000000 11 04000000 0807060504030201")},
	{"recv", Msg{Type: MsgRecv, Time: -1, Data: []byte("@1 200\n")},
		h("10000000 20 ffffffffffffffff 403120323030 0a")},
	{"error", Msg{Type: MsgError, Text: "no"},
		h("03000000 7f 6e6f")},
	{"error empty", Msg{Type: MsgError},
		h("01000000 7f")},
}

func TestProtoVectors(t *testing.T) {
	for _, tc := range protoVectors {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(AppendMsg(nil, tc.msg), tc.wire); diff != "" {
				t.Errorf("AppendMsg (-got +want)\n%s", diff)
			}
			got, n, err := DecodeMsg(append(tc.wire, 0xEE)) // a trailing byte is left alone
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.wire) {
				t.Errorf("took %d bytes, want %d", n, len(tc.wire))
			}
			if diff := cmp.Diff(got, tc.msg); diff != "" {
				t.Errorf("DecodeMsg (-got +want)\n%s", diff)
			}
			for cut := range len(tc.wire) {
				if _, _, err := DecodeMsg(tc.wire[:cut]); !errors.Is(err, ErrShort) {
					t.Fatalf("cut at %d: %v, want ErrShort", cut, err)
				}
			}
		})
	}
}

func TestProtoMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire []byte
	}{
		{"zero length", h("00000000")},
		{"huge length", h("ffffffff 10")},
		{"unknown type", h("01000000 55")},
		{"hello short", h("02000000 01 01")},
		{"hello bad flags", h("03000000 01 01 04")},
		{"hello bad utf8", h("04000000 01 01 00 ff")},
		{"welcome short", h("05000000 02 01 00c201")},
		{"send empty", h("01000000 10")},
		{"sent long", h("0e000000 11 04000000 0807060504030201 00")},
		{"recv no data", h("09000000 20 0807060504030201")},
		{"error bad utf8", h("02000000 7f c3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := DecodeMsg(tc.wire); !errors.Is(err, ErrProtocol) {
				t.Errorf("DecodeMsg = %v, want ErrProtocol", err)
			}
		})
	}
}

func FuzzDecodeMsg(f *testing.F) {
	for _, tc := range protoVectors {
		f.Add(tc.wire)
	}
	f.Add(h("ffffffff"))
	f.Add(h("01000000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := DecodeMsg(b)
		if err != nil {
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrProtocol) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n < headerLen+1 || n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		// Decoding what we encode gives the same message back.
		again := AppendMsg(nil, m)
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding % x gave % x", b[:n], again)
		}
		m2, n2, err := DecodeMsg(again)
		if err != nil || n2 != len(again) {
			t.Fatalf("decode(encode) = %v, %d", err, n2)
		}
		if diff := cmp.Diff(m2, m); diff != "" {
			t.Fatalf("(-got +want)\n%s", diff)
		}
		// The streaming reader agrees.
		mr := &msgReader{r: bytes.NewReader(b)}
		if m3, err := mr.next(); err != nil || !cmp.Equal(m3, m) {
			t.Fatalf("msgReader: %v %+v", err, m3)
		}
	})
}

// startHub serves l on a Unix socket in a temp dir until the test ends.
func startHub(t *testing.T, l *Line) string { return startHubB(t, l) }

func startHubB(t testing.TB, l *Line) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHub(ctx, l, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeHub: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("ServeHub did not stop")
		}
	})
	return path
}

func dial(t *testing.T, path string, opts NodeOptions) *Remote {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := Dial(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func waitNodes(t *testing.T, l *Line, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Nodes != n {
		if time.Now().After(deadline) {
			t.Fatalf("line has %d nodes, want %d", l.Stats().Nodes, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestHubTwoRemotesAndLocal(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { waitGoroutines(t, before) })
	l := newLine(t, Config{Baud: 1_000_000})
	path := startHub(t, l)
	local := attach(t, l, NodeOptions{Name: "gateway"})
	r1 := dial(t, path, NodeOptions{Name: "board-1"})
	r2 := dial(t, path, NodeOptions{Name: "board-2", Echo: true})
	waitNodes(t, l, 3)
	if r1.Baud() != 1_000_000 || r1.Name() != "board-1" {
		t.Fatalf("baud %d name %q", r1.Baud(), r1.Name())
	}

	req := append(h("00 03 01 02 00"), "@1 GET /info\n"...)
	if n, err := local.Write(req); n != len(req) || err != nil {
		t.Fatalf("local Write = %d, %v", n, err)
	}
	for _, r := range []Port{r1, r2} {
		if diff := cmp.Diff(readN(t, r, len(req)), req); diff != "" {
			t.Errorf("%s (-got +want)\n%s", r.Name(), diff)
		}
	}
	rep := []byte("@1 200 {}\n")
	if n, err := r1.Write(rep); n != len(rep) || err != nil {
		t.Fatalf("remote Write = %d, %v", n, err)
	}
	if got := readN(t, local, len(rep)); !bytes.Equal(got, rep) {
		t.Errorf("local got %q", got)
	}
	if got := readN(t, r2, len(rep)); !bytes.Equal(got, rep) {
		t.Errorf("r2 got %q", got)
	}
	// r2 hears its own bytes (echo); r1 does not.
	r2.Write([]byte("x"))
	for _, p := range []Port{local, r1, r2} {
		if got := readN(t, p, 1); string(got) != "x" {
			t.Errorf("%s got %q", p.Name(), got)
		}
	}
	if s := r1.Stats(); s.Sent != int64(len(rep)) || s.Received != int64(len(req)+1) {
		t.Errorf("r1 stats %+v", s)
	}
	// Leaving detaches the node from the line.
	r1.Close()
	waitNodes(t, l, 2)
	if _, err := r1.Write([]byte{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
}

func TestHubWriteTakesWireTime(t *testing.T) {
	l := newLine(t, Config{Baud: 115200})
	path := startHub(t, l)
	r := dial(t, path, NodeOptions{})
	other := attach(t, l, NodeOptions{})
	waitNodes(t, l, 2)
	msg := make([]byte, 300)
	start := time.Now()
	if _, err := r.Write(msg); err != nil {
		t.Fatal(err)
	}
	if el, want := time.Since(start), l.WireTime(len(msg)); el < want {
		t.Errorf("remote Write returned after %v, before the wire time %v", el, want)
	}
	readN(t, other, len(msg))
}

func TestHubSilentFlag(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	path := startHub(t, l)
	r := dial(t, path, NodeOptions{Silent: true})
	o := attach(t, l, NodeOptions{})
	waitNodes(t, l, 2)
	r.Write([]byte("lost"))
	if st := l.Stats(); st.Silenced != 4 || o.Buffered() != 0 {
		t.Errorf("silent remote reached the line: %+v", st)
	}
}

func TestHubStopEndsRemotes(t *testing.T) {
	before := runtime.NumGoroutine()
	l := newLine(t, Config{Baud: fast})
	path := filepath.Join(t.TempDir(), "hub.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHub(ctx, l, ln) }()
	r, err := Dial(context.Background(), path, NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readErr := make(chan error, 1)
	go func() { _, err := r.Read(make([]byte, 1)); readErr <- err }()
	waitNodes(t, l, 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeHub: %v", err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Read after hub stop: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("remote Read not ended by hub stop")
	}
	if st := l.Stats(); st.Nodes != 0 {
		t.Errorf("%d nodes still attached", st.Nodes)
	}
	r.Close()
	waitGoroutines(t, before)
}

func TestHubRejectsGarbage(t *testing.T) {
	l := newLine(t, Config{Baud: fast})
	path := startHub(t, l)
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"not hello", AppendMsg(nil, Msg{Type: MsgSend, Data: []byte{1}})},
		{"wrong version", AppendMsg(nil, Msg{Type: MsgHello, Version: 9})},
		{"bad length", h("ffffffff 01")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(tc.send)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			reply, _ := io.ReadAll(c)
			m, _, err := DecodeMsg(reply)
			if err != nil || m.Type != MsgError {
				t.Fatalf("reply % x: %v", reply, err)
			}
		})
	}
	// A node that breaks the protocol after joining is dropped.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(AppendMsg(nil, Msg{Type: MsgHello, Version: ProtocolVersion}))
	c.Write(AppendMsg(nil, Msg{Type: MsgWelcome, Version: 1, Baud: 1}))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, _ := io.ReadAll(c)
	m, n, err := DecodeMsg(reply)
	if err != nil || m.Type != MsgWelcome {
		t.Fatalf("first reply % x: %v", reply, err)
	}
	if m, _, err := DecodeMsg(reply[n:]); err != nil || m.Type != MsgError {
		t.Fatalf("second reply % x: %v", reply[n:], err)
	}
	waitNodes(t, l, 0)
}

func TestDialErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, filepath.Join(t.TempDir(), "none.sock"), NodeOptions{}); err == nil {
		t.Error("dialing a missing socket worked")
	}
	// A listener that never answers: the context ends the handshake.
	path := filepath.Join(t.TempDir(), "mute.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := Dial(short, path, NodeOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("mute hub: %v, want deadline exceeded", err)
	}
	long := string(bytes.Repeat([]byte("n"), MaxName+1))
	if _, err := Dial(ctx, path, NodeOptions{Name: long}); !errors.Is(err, ErrConfig) {
		t.Errorf("long name: %v", err)
	}
	// A closed line refuses the node.
	l, _ := New(Config{})
	hub := startHub(t, l)
	l.Close()
	if _, err := Dial(ctx, hub, NodeOptions{}); !errors.Is(err, ErrProtocol) {
		t.Errorf("closed line: %v, want ErrProtocol", err)
	}
}
