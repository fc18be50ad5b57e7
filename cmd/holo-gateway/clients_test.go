package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"

	"github.com/holofleet/holofleet/bus/boardclient"
	"github.com/holofleet/holofleet/gateway/api/fleetclient"
)

var updateClients = flag.Bool("update-clients", false, "rewrite the generated API clients (make clients)")

// The generated clients, from this package's directory.
const (
	fleetClientFile = "../../gateway/api/fleetclient/fleet.gen.go"
	boardClientFile = "../../bus/boardclient/board.gen.go"
)

var demoBoardURL = regexp.MustCompile(`(?m)^\s+board\s+\d+\s+id \S+\s+group \[[0-9 ]*\]\s+(http://\S+)`)

// TestGeneratedClients generates a Go client of each API with
// oapi-codegen (the version go.mod pins as a tool) from the description a
// real demo gateway and its board serve (the gateway's Swagger 2.0
// converted to OpenAPI 3, which oapi-codegen reads), checks the committed
// clients are exactly that (make clients rewrites them), and makes a call
// with each against the running servers.
func TestGeneratedClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation and runs oapi-codegen")
	}
	t.Parallel()
	base, banner := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "1",
		"--demo-groups", "1", "--mqtt", noBroker)
	m := demoBoardURL.FindStringSubmatch(banner.String())
	if m == nil {
		t.Fatalf("no board URL in the banner:\n%s", banner.String())
	}
	boardURL := m[1]

	// The gateway's description, as OpenAPI 3.
	code, body := get(t, base+"/v1/openapi.json", "")
	if code != http.StatusOK {
		t.Fatalf("gateway openapi.json: %d", code)
	}
	var v2 openapi2.T
	if err := v2.UnmarshalJSON([]byte(body)); err != nil {
		t.Fatal(err)
	}
	v3, err := openapi2conv.ToV3(&v2)
	if err != nil {
		t.Fatal(err)
	}
	fleetDoc, err := v3.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	code, boardDoc := get(t, boardURL+"/api/v1/openapi.json", "")
	if code != http.StatusOK {
		t.Fatalf("board openapi.json: %d", code)
	}

	gens := []struct {
		doc       []byte
		pkg, file string
		got       []byte
		err       error
	}{
		{doc: fleetDoc, pkg: "fleetclient", file: fleetClientFile},
		{doc: []byte(boardDoc), pkg: "boardclient", file: boardClientFile},
	}
	// The two generators run at once (each go tool run is seconds of
	// the go command's own work).
	var wg sync.WaitGroup
	for i := range gens {
		c := &gens[i]
		doc := filepath.Join(t.TempDir(), c.pkg+".json")
		if err := os.WriteFile(doc, c.doc, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			cmd := exec.Command("go", "tool", "oapi-codegen", "-generate", "types,client", "-package", c.pkg, doc)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if c.got, c.err = cmd.Output(); c.err != nil {
				c.err = fmt.Errorf("%w\n%s", c.err, stderr.String())
			}
		})
	}
	wg.Wait()
	for _, c := range gens {
		got := c.got
		if c.err != nil {
			t.Fatalf("oapi-codegen %s: %v", c.pkg, c.err)
		}
		if *updateClients {
			if err := os.WriteFile(c.file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what oapi-codegen makes of the served description: run make clients", c.file)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fc, err := fleetclient.NewClientWithResponses(base)
	if err != nil {
		t.Fatal(err)
	}
	boards, err := fc.FleetServiceListBoardsWithResponse(ctx, &fleetclient.FleetServiceListBoardsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if boards.StatusCode() != http.StatusOK || boards.JSON200 == nil {
		t.Fatalf("fleet client: ListBoards: %d %s", boards.StatusCode(), boards.Body)
	}
	t.Logf("fleet client: %d boards", len(*boards.JSON200))
	show, err := fc.CueServiceGetCueStateWithResponse(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if show.StatusCode() != http.StatusOK || show.JSON200 == nil || show.JSON200.Standby == nil || *show.JSON200.Standby != "1" {
		t.Fatalf("fleet client: GetCueState: %d %s", show.StatusCode(), show.Body)
	}
	t.Logf("fleet client: the demo show on standby %s", *show.JSON200.Standby)

	bc, err := boardclient.NewClientWithResponses(boardURL + "/api/v1")
	if err != nil {
		t.Fatal(err)
	}
	info, err := bc.GetInfoWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.StatusCode() != http.StatusOK || info.JSON200 == nil || info.JSON200.Id == "" {
		t.Fatalf("board client: GET /info: %d %s", info.StatusCode(), info.Body)
	}
	t.Logf("board client: board %s", info.JSON200.Id)
}
