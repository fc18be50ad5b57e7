package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestServedOpenAPILint: the gateway's whole /v1/openapi.json, with the
// routes it serves beside grpc-gateway (the installation's), describes
// every installation route and is clean under redocly lint with the
// project's rules (gateway/api's TestRedoclyLint lints the API server's
// own document).
func TestServedOpenAPILint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the gateway")
	}
	redocly, err := exec.LookPath("redocly")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redocly is not installed (CI installs @redocly/cli from npm)")
		}
		t.Skip("redocly is not installed (npm install -g @redocly/cli@2.77.0)")
	}
	t.Parallel()
	base, _ := start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--mqtt", noBroker)
	code, body := get(t, base+"/v1/openapi.json", "")
	if code != http.StatusOK {
		t.Fatalf("openapi.json: %d", code)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ path, method string }{
		{"/v1/installation", "get"}, {"/v1/installation/schema", "get"}, {"/v1/installation/content", "post"},
		{"/v1/installation/content/{sha}", "get"}, {"/v1/installation/plan", "post"}, {"/v1/installation/apply", "post"},
		{"/v1/installation/status", "get"}, {"/v1/installation/history", "get"}, {"/v1/installation/revisions/{n}", "get"},
		{"/v1/installation/rollback", "post"}, {"/v1/installation/export", "post"}, {"/v1/installation/runs/{id}", "get"},
		{"/v1/installation/runs/{id}/{verb}", "post"},
	} {
		if doc.Paths[r.path][r.method] == nil {
			t.Errorf("%s %s is not described", r.method, r.path)
		}
	}
	file := filepath.Join(t.TempDir(), "gateway-openapi.json")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(redocly, "lint", "--config", "../../redocly.yaml", "--format", "json", file).Output()
	var report struct {
		Totals struct {
			Errors, Warnings, Ignored int
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint: %v %v\n%s", err, jerr, out)
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("%s %s: %s", p.RuleID, where, p.Message)
	}
	if report.Totals.Errors+report.Totals.Warnings+report.Totals.Ignored > 0 || err != nil {
		t.Errorf("redocly lint: %d errors, %d warnings, %d ignored (%v)", report.Totals.Errors, report.Totals.Warnings, report.Totals.Ignored, err)
	}
}
