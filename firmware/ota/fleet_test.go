package ota

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/board"
)

// fleetBoard runs one in-process board with the feature in fleet mode.
type fleetBoard struct {
	url    string
	mu     sync.Mutex
	booted []string
}

func (f *fleetBoard) versions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.booted...)
}

func startFleetBoard(t *testing.T, failVersion string) *fleetBoard {
	return startFleetBoardWith(t, failVersion, nil)
}

// startFleetBoardWith starts a fleet board whose feature burns keys.
func startFleetBoardWith(t *testing.T, failVersion string, keys []image.KeyDigest) *fleetBoard {
	fb := &fleetBoard{}
	fleet := &Fleet{
		FailTrial: func(a App) bool { return a.Version == failVersion },
		OnBoot: func(a App) {
			fb.mu.Lock()
			fb.booted = append(fb.booted, a.Version)
			fb.mu.Unlock()
		},
		Install: func() ([]byte, error) { return testImage(t, "1.0.0", "holo-board", 3000), nil },
	}
	b, err := board.Open(board.Config{DataDir: t.TempDir(), Features: []board.Feature{Feature(Config{Fleet: fleet, Keys: keys})}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	fb.url = "http://" + ln.Addr().String() + "/api/v1"
	return fb
}

func (f *fleetBoard) status(t *testing.T) (Status, bool) {
	resp, err := http.Get(f.url + "/ota")
	if err != nil {
		return Status{}, false
	}
	defer resp.Body.Close()
	var st Status
	return st, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&st) == nil
}

func (f *fleetBoard) waitRunning(t *testing.T, label, version, state string) Status {
	t.Helper()
	var last Status
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := f.status(t); ok {
			last = st
			for _, s := range st.Slots {
				if s.Running && s.Label == label && s.App != nil && s.App.Version == version && s.State != nil && *s.State == state {
					return st
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("never running %s %s %s: %+v", label, version, state, last)
	return last
}

func TestFleetUpdateAndFaultRollback(t *testing.T) {
	fb := startFleetBoard(t, "3.0.0")
	fb.waitRunning(t, "ota_0", "1.0.0", "confirmed")
	up := func(version string) {
		img := testImage(t, version, "holo-board", 5000)
		req, _ := http.NewRequest("PUT", fb.url+"/ota/image?activate=1", bytes.NewReader(img))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("upload %s: %d", version, resp.StatusCode)
		}
	}
	up("2.0.0")
	st := fb.waitRunning(t, "ota_1", "2.0.0", "confirmed")
	if !st.Rollback {
		t.Fatalf("no rollback offered: %+v", st)
	}
	// /info tells the firmware this board boots, not the process's.
	resp, err := http.Get(fb.url + "/info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Firmware struct{ Version string } `json:"firmware"`
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.Firmware.Version != "2.0.0" {
		t.Fatalf("/info firmware %q (%v), want 2.0.0", info.Firmware.Version, err)
	}
	up("3.0.0") // the fault hook fails its trial
	deadline := time.Now().Add(30 * time.Second)
	for len(fb.versions()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st = fb.waitRunning(t, "ota_1", "2.0.0", "confirmed")
	if *st.Slots[0].State != "rolled_back" || st.Slots[0].App.Version != "3.0.0" {
		t.Fatalf("after the failed trial: %+v", st.Slots)
	}
	got := fb.versions()
	want := []string{"1.0.0", "2.0.0", "3.0.0", "2.0.0"}
	if len(got) != len(want) {
		t.Fatalf("boots %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("boots %v, want %v", got, want)
		}
	}
}

// put uploads img with query and returns the status.
func (f *fleetBoard) put(t *testing.T, img []byte, query string) int {
	t.Helper()
	req, _ := http.NewRequest("PUT", f.url+"/ota/image"+query, bytes.NewReader(img))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
