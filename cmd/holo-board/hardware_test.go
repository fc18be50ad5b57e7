package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

// TestHALLinuxRefusesBadHardware runs holo-board --hal linux as a user
// would on a machine whose description is wrong, or whose parts are not
// there (this one has no spidev, i2c-dev or GPIO of a Pi): it stops at
// once, naming each field or part, and never serves.
func TestHALLinuxRefusesBadHardware(t *testing.T) {
	t.Parallel()
	bin := boardtest.Binary(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown hal", []string{"--hal", "esp32"}, []string{`--hal: want sim or linux, not "esp32"`}},
		{"no description", []string{"--hal", "linux", "--hardware", filepath.Join(dir, "none.json")}, []string{"hardware description", "none.json"}},
		{"bad description", []string{"--hal", "linux", "--hardware", write("bad.json", `{"display":{"spi":"/dev/spidev0.0"},"servos":{"i2c":"/dev/i2c-1","pan":3,"tilt":3}}`)},
			[]string{"display.dc: a pin is required", "pan and tilt are both channel 3"}},
		{"parts missing", []string{"--hal", "linux", "--open-ota", "--bootloader=false", "--hardware", write("pi.json",
			`{"display":{"spi":"/dev/spidev9.0","dc":"GPIO25"},"servos":{"i2c":"/dev/i2c-9","pan":0,"tilt":1},"boot_button":"GPIO999"}`)},
			[]string{"hardware missing: display (/dev/spidev9.0)", "hardware missing: servos (/dev/i2c-9)", "boot_button (GPIO999)"}},
		// The simulated crystal's skew is the simulator's alone, and bounded.
		{"clock-ppm on linux", []string{"--hal", "linux", "--clock-ppm", "20", "--hardware", filepath.Join(dir, "none.json")}, []string{"--clock-ppm: a simulated crystal"}},
		{"clock-ppm too far", []string{"--clock-ppm", "2000"}, []string{"--clock-ppm: a simulated crystal (--hal sim) within ±1000 ppm, not 2000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0"}, tc.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = boardtest.Env()
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("holo-board started:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "listening on") {
				t.Errorf("it served:\n%s", out)
			}
		})
	}
}
