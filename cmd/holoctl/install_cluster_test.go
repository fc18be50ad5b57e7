package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/installation"
)

// TestPrintPlansGateway: a status from a cluster names each board's
// gateway; a gateway running alone prints the table as before.
func TestPrintPlansGateway(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plans  []installation.BoardPlan
		header string
		row    string
	}{
		{"alone", []installation.BoardPlan{{Board: "b1", Profile: "p", State: "in_sync", Summary: "in sync"}},
			"BOARD  PROFILE  STATE    SUMMARY", "b1     p        in_sync  in sync"},
		{"cluster", []installation.BoardPlan{{Board: "b1", Profile: "p", State: "in_sync", Summary: "in sync", Gateway: "stage"}},
			"BOARD  GATEWAY  PROFILE  STATE    SUMMARY", "b1     stage    p        in_sync  in sync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printPlans(&b, tc.plans, false); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
			if len(lines) != 2 || strings.TrimRight(lines[0], " ") != tc.header || strings.TrimRight(lines[1], " ") != tc.row {
				t.Fatalf("got\n%s", b.String())
			}
		})
	}
}
