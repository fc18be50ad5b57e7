package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/simline"
)

func TestInstallation(t *testing.T) {
	dir, err := os.MkdirTemp("", "demo") // short: the hub socket path must fit
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	in, err := Start(context.Background(), Options{Dir: dir, Boards: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var groups [][]int
	for i, b := range in.Boards() {
		groups = append(groups, b.Groups)
		if b.Address != i+1 || b.URL != in.URLs[i] {
			t.Errorf("board %d: %+v", i, b)
		}
		resp, err := http.Get(b.URL + "/api/v1/info")
		if err != nil {
			t.Fatal(err)
		}
		var info struct{ ID string }
		json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if info.ID != b.ID {
			t.Errorf("board %d answers as %q, want %q", i, info.ID, b.ID)
		}
		// Every board has the update service, booted from its slots.
		resp, err = http.Get(b.URL + "/api/v1/ota")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Slots []struct {
				Running bool
				State   *string
			}
		}
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(st.Slots) != 2 || !st.Slots[0].Running {
			t.Errorf("board %d GET /ota: %d %+v", i, resp.StatusCode, st)
		}
	}
	if diff := cmp.Diff(groups, [][]int{{1}, {2}, {1}, {2}}); diff != "" {
		t.Errorf("groups (-got +want)\n%s", diff)
	}
	// Another process joins through the hub and hears the master.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := simline.Dial(ctx, in.HubPath, simline.NodeOptions{Name: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := in.Master.Write([]byte("@1 GET /leds\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	var heard strings.Builder
	for !strings.Contains(heard.String(), "@1 GET /leds") {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		heard.Write(buf[:n])
	}
	s := in.Summary()
	for _, want := range []string{"4 boards in 2 groups", in.HubURL, in.URLs[3]} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if err := in.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(in.HubPath); !os.IsNotExist(err) {
		t.Errorf("hub socket left behind: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{{}, {Dir: t.TempDir(), Boards: 224}, {Dir: t.TempDir(), Groups: 32}, {Dir: t.TempDir(), Boards: -1}} {
		if _, err := Start(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("Start(%+v): %v, want ErrOptions", o, err)
		}
	}
}

// TestKeys: given keys, every demo board burns them (secure boot on), and
// keeps them when the demo starts again without keys.
func TestKeys(t *testing.T) {
	dir, err := os.MkdirTemp("", "demo")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	key := image.KeyDigest{1, 2, 3}
	secure := func(in *Installation) {
		t.Helper()
		for i, b := range in.Boards() {
			resp, err := http.Get(b.URL + "/api/v1/ota")
			if err != nil {
				t.Fatal(err)
			}
			var st boardapi.OTAStatus
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if !st.SecureBoot.Enabled || len(st.SecureBoot.Keys) != 1 || st.SecureBoot.Keys[0].Digest != key.String() {
				t.Errorf("board %d secure_boot %+v", i, st.SecureBoot)
			}
		}
	}
	in, err := Start(context.Background(), Options{Dir: dir, Boards: 2, Keys: []image.KeyDigest{key}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.Summary(), "secure boot: new boards burn "+key.Short()) {
		t.Errorf("summary:\n%s", in.Summary())
	}
	secure(in)
	in.Close()
	in, err = Start(context.Background(), Options{Dir: dir, Boards: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	secure(in)
}

// TestShowChecks: the demo's show is a list the engine saves as it is.
func TestShowChecks(t *testing.T) {
	l := Show()
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if len(l.Cues) != 3 || l.Cues[1].Follow != "after" || l.Cues[1].FollowMS != 2000 {
		t.Fatalf("show: %+v", l)
	}
}
