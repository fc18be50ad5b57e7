package api

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRedoclyLint runs redocly lint (the npm package @redocly/cli, with the
// repository's redocly.yaml: the recommended rules) on the document a
// real gateway serves at /v1/openapi.json and wants no error and no
// warning. Skipped where the CLI is not installed, except in CI, which
// installs it.
func TestRedoclyLint(t *testing.T) {
	redocly, err := exec.LookPath("redocly")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redocly is not installed (CI installs @redocly/cli from npm)")
		}
		t.Skip("redocly is not installed (npm install -g @redocly/cli@2.77.0)")
	}
	g := startGateway(t)
	code, body := g.rest(t, "", "GET", "/v1/openapi.json", "")
	if code != 200 {
		t.Fatalf("openapi: %d", code)
	}
	doc := filepath.Join(t.TempDir(), "gateway-openapi.json")
	if err := os.WriteFile(doc, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(redocly, "lint", "--config", "../../redocly.yaml", "--format", "json", doc).Output()
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
