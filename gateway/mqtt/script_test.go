package mqtt_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMosquittoClients runs testdata/clients.sh, which talks to the bridge
// with mosquitto_sub and mosquitto_pub, against each broker.
func TestMosquittoClients(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	for _, tool := range []string{"mosquitto_sub", "mosquitto_pub", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian: mosquitto-clients)", tool)
		}
	}
	t.Parallel()
	for _, bc := range brokerCases() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			url := bc.start(t)
			r := startRig(t, url, rigOptions{n: 2, lanOnly: true})
			names := r.waitOnline(t)
			host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "tcp://"))
			cmd := exec.Command("bash", "testdata/clients.sh")
			cmd.Env = append(os.Environ(), "HOST="+host, "PORT="+port, "BASE="+r.base, "BOARD="+names[1], "TMPDIR="+t.TempDir())
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(90 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if err != nil || !strings.Contains(string(out), "ok") {
				t.Fatalf("clients.sh: %v\n%s", err, out)
			}
		})
	}
}
