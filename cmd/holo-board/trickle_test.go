package main

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

// TestTrickledUploadsAreCut is the attack of issue 25 row 12 on a real
// process: a client that declares 1 MB and then sends one byte at a time,
// never pausing as long as the stall timeout, held the long-operation
// lock for ever and every other upload got 409. Now it is cut once it
// averages under --min-rate over --rate-window of waiting (1000 B/s over
// 300 ms here; the client sends a byte every 20 ms, 50 B/s): the lock is
// free again, the client gets 400, and the system event says too_slow.
func TestTrickledUploadsAreCut(t *testing.T) {
	b := boardtest.Start(t, "", "--min-rate", "1000", "--rate-window", "300ms")
	req, _ := http.NewRequest("GET", b.URL+"/api/v1/events?kinds=system", nil)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	events := bufio.NewScanner(stream.Body)

	conn := stallingPUT(t, b, "/fs/file?path=/big.bin")
	part := filepath.Join(b.DataDir, "storage", "big.bin.part")
	boardtest.WaitFor(t, 5*time.Second, "the upload to start", func() bool { _, err := os.Stat(part); return err == nil })
	expect(t, upload(b, "/other.bin", "", []byte("x")), 409, "busy")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the attacker: a byte every 20 ms until the board hangs up
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	status, msg := reply(t, conn)
	if status != 400 || !strings.Contains(msg, "minimum") {
		t.Errorf("the trickling client got %d %s", status, msg)
	}
	cut := systemCut(t, events)
	if cut["what"] != "uploading /big.bin" || cut["reason"] != "too_slow" {
		t.Errorf("system last_cut %v", cut)
	}
	boardtest.WaitFor(t, 5*time.Second, "the .part file to go", func() bool { _, err := os.Stat(part); return os.IsNotExist(err) })
	expect(t, upload(b, "/other.bin", "", []byte("x")), 201, "")
}
