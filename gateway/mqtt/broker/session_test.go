package broker_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
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
	audited := &auditRecorder{}
	f := start(t, broker.Options{Anonymous: auth.RoleViewer, Audit: audited})
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
	// The refusal to resume is in the audit log, with who tried.
	if recs := audited.taken(); len(recs) == 0 || recs[0].Surface != auth.SurfaceMQTT || recs[0].Name != id ||
		recs[0].Who.Name != broker.AnonymousName || !strings.Contains(recs[0].Reason, "not resumed") || recs[0].Allowed {
		t.Errorf("audit records of the refused resume: %+v", recs)
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

// subackCodes runs mosquitto_sub -d -E (exit once subscribed) with
// filters in one SUBSCRIBE and returns the SUBACK's codes as it prints
// them ("0, 0, 128").
func (f *fixture) subackCodes(t *testing.T, args []string, filters ...string) string {
	t.Helper()
	for _, flt := range filters {
		args = append(args, "-t", flt)
	}
	out := f.mosquitto(t, "mosquitto_sub", append([]string{"-d", "-E"}, args...)...)
	for _, line := range strings.Split(out, "\n") {
		if _, codes, ok := strings.Cut(line, "Subscribed (mid: 1): "); ok {
			return strings.TrimSpace(codes)
		}
	}
	t.Fatalf("no SUBACK in:\n%s", out)
	return ""
}

func filters(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s/%d", prefix, i))
	}
	return out
}

// TestSubscriptionLimits: issue 25 row 8: 10 anonymous demo clients
// subscribed 1,000,000 filters (+600 MB). The filters of one SUBSCRIBE,
// the subscriptions of one client and of all clients are capped; a
// filter beyond is refused in SUBACK (0x80 for 3.1.1, 0x97 for 5), the
// others are granted. With the real mosquitto clients.
func TestSubscriptionLimits(t *testing.T) {
	f := start(t, broker.Options{Anonymous: auth.RoleViewer,
		Limits: broker.Limits{MaxFilters: 3, MaxSubscriptions: 5, MaxSubscriptionsTotal: 8}})
	// Per SUBSCRIBE.
	if got := f.subackCodes(t, nil, filters("holo/a", 4)...); got != "0, 0, 0, 128" {
		t.Errorf("4 filters, at most 3 a packet: %s", got)
	}
	if got := f.subackCodes(t, []string{"-V", "5"}, filters("holo/a", 4)...); got != "0, 0, 0, 151" {
		t.Errorf("MQTT 5: %s", got)
	}
	// Per client: a kept session gathers its subscriptions over packets.
	kept := []string{"-i", "greedy", "-c", "-q", "1"}
	if got := f.subackCodes(t, kept, filters("holo/b", 3)...); got != "1, 1, 1" {
		t.Fatalf("first 3: %s", got)
	}
	if got := f.subackCodes(t, kept, "holo/b/0", "holo/c/0", "holo/c/1"); got != "1, 1, 1" {
		t.Errorf("up to 5 for one client: %s", got)
	}
	if got := f.subackCodes(t, kept, "holo/c/2"); got != "128" {
		t.Errorf("beyond 5 for one client: %s", got)
	}
	// In all: the kept session holds 5 of 8; another kept one takes the
	// last 3; then nobody gets one more.
	if got := f.subackCodes(t, []string{"-i", "greedy2", "-c", "-q", "1"}, filters("holo/d", 3)...); got != "1, 1, 1" {
		t.Errorf("the last 3 in all: %s", got)
	}
	if got := f.subackCodes(t, nil, "holo/e/0"); got != "128" {
		t.Errorf("beyond 8 in all: %s", got)
	}
	if n := f.b.Stats().RefusedSubscribe; n != 4 {
		t.Errorf("refused %d filters, want 4", n)
	}
}

// TestSubscriptionDefaults: the default limits let a client (Home
// Assistant) subscribe 500 filters a packet, and refuse the 501st.
func TestSubscriptionDefaults(t *testing.T) {
	f := start(t, broker.Options{})
	codes := f.subackCodes(t, []string{"-V", "5", "-u", "viewer", "-P", f.secrets["viewer"]}, filters("holo/x", broker.DefaultMaxFilters+1)...)
	want := strings.Repeat("0, ", broker.DefaultMaxFilters) + "151"
	if codes != want {
		t.Errorf("SUBACK of %d filters ends %q", broker.DefaultMaxFilters+1, codes[max(0, len(codes)-20):])
	}
}

// auditRecorder keeps the records the broker gives its auditor.
type auditRecorder struct {
	mu   sync.Mutex
	recs []auth.Record
}

func (a *auditRecorder) Audit(r auth.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
}

func (a *auditRecorder) taken() []auth.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.recs)
}
