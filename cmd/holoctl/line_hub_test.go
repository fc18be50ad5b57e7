package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/testbin"
)

// syncBuffer collects a process's output while the test reads it.
type syncBuffer = testbin.Output

func waitOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in output:\n%s", want, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dialNode(t *testing.T, path, name string) *simline.Remote {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := simline.Dial(ctx, path, simline.NodeOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, b); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out reading %d bytes", n)
	}
	return b
}

func TestLineHubInProcess(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "line.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"line-hub", "--socket", sock, "--baud", "1000000", "--silent", "mute", "--stats", "10ms"}, &out, &errOut)
	}()
	waitOutput(t, &out, "listening on "+sock)

	gw := dialNode(t, sock, "gateway")
	b1 := dialNode(t, sock, "board-1")
	mute := dialNode(t, sock, "mute")
	gw.Write([]byte("@1 GET /info\n"))
	if got := readN(t, b1, 13); string(got) != "@1 GET /info\n" {
		t.Fatalf("board got %q", got)
	}
	readN(t, mute, 13) // a silent node still hears
	mute.Write([]byte("nobody"))
	b1.Write([]byte("@1 200 {}\n"))
	if got := readN(t, gw, 10); string(got) != "@1 200 {}\n" {
		t.Fatalf("gateway got %q (the silent node must not be heard)", got)
	}
	waitOutput(t, &out, "lines=2")

	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("line-hub did not stop")
	}
	if !strings.Contains(out.String(), "silenced=6") {
		t.Errorf("final stats missing silenced=6:\n%s", out.String())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"help"}, 0},
		{[]string{"help", "line-hub"}, 0},
		{[]string{"nope"}, 2},
		{[]string{"line-hub"}, 2},
		{[]string{"line-hub", "--socket", "/tmp/x.sock", "--drop-rate", "2"}, 2},
		{[]string{"line-hub", "--bogus"}, 2},
		{[]string{"line-hub", "--socket", "/nonexistent-dir/x.sock"}, 1},
	} {
		var out, errOut syncBuffer
		if c := run(ctx, tc.args, &out, &errOut); c != tc.code {
			t.Errorf("run %q = %d, want %d\n%s%s", tc.args, c, tc.code, out.String(), errOut.String())
		}
	}
}

func TestLineHubRefusesLiveSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "line.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"line-hub", "--socket", sock}, &out, io.Discard) }()
	waitOutput(t, &out, "listening")
	var errOut syncBuffer
	if c := run(ctx, []string{"line-hub", "--socket", sock}, io.Discard, &errOut); c != 1 || !strings.Contains(errOut.String(), "already serves") {
		t.Errorf("second hub: exit %d, %s", c, errOut.String())
	}
	cancel()
	<-done
}

// TestBinary runs holoctl as a user would, a process of its own, and
// stops it with SIGINT. The process is this test binary running main
// (TestMain), not a second build: linking one took most of this
// package's time.
func TestBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "hub.sock")
	// A stale socket file from a crashed hub is replaced.
	os.WriteFile(sock, nil, 0o600)
	os.Remove(sock)
	cmd := exec.Command(bin, "line-hub", "--socket", sock, "--baud", "115200")
	cmd.Env = append(os.Environ(), asHoloctl+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening on "+sock) {
		t.Fatalf("first line %q, stderr %s", sc.Text(), stderr.String())
	}
	a := dialNode(t, sock, "a")
	b := dialNode(t, sock, "b")
	if a.Baud() != 115200 {
		t.Errorf("baud %d", a.Baud())
	}
	a.Write([]byte{0x00, 0x02, 0x01, 0x00})
	if got := readN(t, b, 4); !bytes.Equal(got, []byte{0x00, 0x02, 0x01, 0x00}) {
		t.Fatalf("got % x", got)
	}
	cmd.Process.Signal(syscall.SIGINT)
	rest, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v, stderr %s", err, stderr.String())
	}
	if !strings.Contains(string(rest), "frames=1") {
		t.Errorf("final stats %q", rest)
	}
}
