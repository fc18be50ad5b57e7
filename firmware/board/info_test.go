package board

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

// TestInfoFeaturesKeepToTheSpec: GET /info's features holds only the
// specification's names; the board's own extensions (fire, time) are in
// extensions. A feature package that registers a name outside the
// specification's list is refused at boot (a panic: a programming error
// the first boot shows).
func TestInfoFeaturesKeepToTheSpec(t *testing.T) {
	withSpec := func(b *Boot) error { b.AddFeature(boardapi.FeatureLEDs); return nil }
	addr := startBoard(t, Config{Features: []Feature{withSpec}})
	resp, err := http.Get("http://" + addr + "/api/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Features   []string `json:"features"`
		Extensions []string `json:"extensions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	for _, f := range info.Features {
		if !boardapi.IsFeature(f) {
			t.Errorf("features holds %q, not one of the specification's %v", f, boardapi.Features)
		}
	}
	if !slices.Contains(info.Features, boardapi.FeatureLEDs) || !slices.Contains(info.Features, boardapi.FeatureEvents) {
		t.Errorf("features %v: want leds and events", info.Features)
	}
	if !slices.Contains(info.Extensions, boardapi.ExtensionFire) || !slices.Contains(info.Extensions, boardapi.ExtensionTime) {
		t.Errorf("extensions %v: want fire and time", info.Extensions)
	}
	doc, err := http.Get("http://" + addr + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer doc.Body.Close()
	body, err := io.ReadAll(doc.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"extensions"`) || !strings.Contains(string(body), "holofleet extensions of the board API") {
		t.Error("openapi.json does not describe GET /info's extensions")
	}

	defer func() {
		if recover() == nil {
			t.Error("AddFeature with a name outside the specification did not panic")
		}
	}()
	(&Boot{features: map[string]bool{}}).AddFeature("fire", []api.Route{}...)
}
