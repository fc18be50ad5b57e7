package broker_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

// mosquitto runs a mosquitto client (mosquitto_sub, mosquitto_pub)
// against f's broker and returns its output; the test is skipped where
// the clients are not installed.
func (f *fixture) mosquitto(t *testing.T, tool string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s not installed (Debian: mosquitto-clients)", tool)
	}
	host, port, _ := strings.Cut(f.b.Addr(), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKeptSessionOnlyForItsIdentity: issue 25 row 7: an admin's kept
// session (clean session off) was resumed by an anonymous client with the
// same client id, which got the admin's queued messages. Another
// identity now starts clean; the same identity still resumes. With the
// real mosquitto clients.
func TestKeptSessionOnlyForItsIdentity(t *testing.T) {
	f := start(t, broker.Options{Anonymous: auth.RoleViewer})
	admin := []string{"-u", "admin", "-P", f.secrets["admin"]}
	bridge := []string{"-u", gwUser, "-P", gwPass}
	const id = "ha-shared"
	// The admin's session subscribes at QoS 1, is kept, goes away.
	f.mosquitto(t, "mosquitto_sub", append([]string{"-i", id, "-c", "-q", "1", "-t", "holo/b1/#", "-E"}, admin...)...)
	// A message for it is queued, and a retained marker waits elsewhere.
	f.mosquitto(t, "mosquitto_pub", append([]string{"-q", "1", "-t", "holo/b1/reply", "-m", "for-the-admin"}, bridge...)...)
	f.mosquitto(t, "mosquitto_pub", append([]string{"-q", "1", "-r", "-t", "holo/marker", "-m", "marker"}, bridge...)...)

	// Anonymous, same id, clean session off: the first message it gets is
	// the marker it subscribed to, not the admin's.
	got := f.mosquitto(t, "mosquitto_sub", "-i", id, "-c", "-q", "1", "-t", "holo/marker", "-v", "-C", "1", "-W", "15")
	if strings.TrimSpace(got) != "holo/marker marker" {
		t.Fatalf("anonymous client with the admin's client id got %q, want only the marker", got)
	}
	// The admin's subscription did not survive in the anonymous session.
	f.mosquitto(t, "mosquitto_pub", append([]string{"-q", "1", "-t", "holo/b1/reply", "-m", "second"}, bridge...)...)
	got = f.mosquitto(t, "mosquitto_sub", "-i", id, "-c", "-q", "1", "-t", "holo/marker", "-v", "-C", "1", "-W", "15")
	if strings.TrimSpace(got) != "holo/marker marker" {
		t.Fatalf("the anonymous session inherited the admin's subscription: %q", got)
	}

	// The same identity resumes its kept session and gets what was queued.
	f.mosquitto(t, "mosquitto_sub", append([]string{"-i", "ops-1", "-c", "-q", "1", "-t", "holo/b2/#", "-E"}, admin...)...)
	f.mosquitto(t, "mosquitto_pub", append([]string{"-q", "1", "-t", "holo/b2/reply", "-m", "kept"}, bridge...)...)
	got = f.mosquitto(t, "mosquitto_sub", append([]string{"-i", "ops-1", "-c", "-q", "1", "-t", "holo/marker", "-v", "-C", "1", "-W", "15"}, admin...)...)
	if strings.TrimSpace(got) != "holo/b2/reply kept" {
		t.Fatalf("the admin's own kept session was not resumed: %q", got)
	}

}
