package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestBoardAndLinkCommands(t *testing.T) {
	linkAddr := freePort(t)
	b := boardtest.Start(t, "", "--uart", "tcp://"+linkAddr)
	ctx := context.Background()
	run1 := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, args, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run1("board", "--url", b.URL, "info"); code != 0 || !strings.Contains(out, `"hostname"`) {
		t.Fatalf("board info: %d %s %s", code, out, errs)
	}
	if code, out, _ := run1("board", "--url", b.URL, "-o", "json", "call", "PATCH", "/leds", `{"mode":"solid","colour":"red"}`); code != 0 || !strings.Contains(out, `"#ff0000"`) {
		t.Fatalf("board call: %d %s", code, out)
	}
	if code, _, errs := run1("board", "--url", b.URL, "call", "PATCH", "/leds", `{"mode":"dance"}`); code != 1 || !strings.Contains(errs, "bad_request") {
		t.Fatalf("bad call: %d %s", code, errs)
	}
	local := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(local, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run1("board", "--url", b.URL, "upload", local, "/notes/a.txt"); code != 0 || !strings.Contains(out, `"size": 5`) {
		t.Fatalf("upload: %d %s %s", code, out, errs)
	}
	if code, _, _ := run1("board", "--url", b.URL, "nope"); code != 2 {
		t.Fatalf("unknown board command exit %d", code)
	}
	port := "tcp+dial://" + linkAddr
	if code, out, errs := run1("link", "--port", port, "send", "GET /leds"); code != 0 || !strings.Contains(out, `"mode":"solid"`) {
		t.Fatalf("link send: %d %s %s", code, out, errs)
	}
	if code, out, errs := run1("link", "--port", port, "ping"); code != 0 || !strings.Contains(out, "protocol 1") {
		t.Fatalf("link ping: %d %s %s", code, out, errs)
	}
	if code, out, _ := run1("link", "--port", port, "status"); code != 0 || !strings.Contains(out, "LEDs:solid") {
		t.Fatalf("link status: %d %s", code, out)
	}
	if code, _, _ := run1("link", "--port", port, "send", "get nothing"); code != 2 {
		t.Fatalf("bad line exit %d", code)
	}
}
