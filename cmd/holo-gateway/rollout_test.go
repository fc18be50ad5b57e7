package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestFirmwareAPIWired: the gateway hands its firmware store and rollout
// engine to the API.
func TestFirmwareAPIWired(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	t.Parallel()
	base, _ := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "1", "--demo-groups", "1")
	for _, p := range []string{"/v1/artifacts", "/v1/channels", "/v1/rollouts"} {
		if code, body := get(t, base+p, ""); code != 200 || strings.TrimSpace(body) != "[]" {
			t.Errorf("GET %s: %d %s, want 200 []", p, code, body)
		}
	}
	resp, err := http.Post(base+"/v1/artifacts?name=x.bin", "application/octet-stream", strings.NewReader("not an image"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("POST /v1/artifacts of junk: %d, want 400 from the store's check", resp.StatusCode)
	}
}
