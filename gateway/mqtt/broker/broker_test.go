package broker_test

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/testbin"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
	"github.com/holofleet/holofleet/gateway/mqtt/policy"
	"github.com/holofleet/holofleet/store"
)

// MQTT 3.1.1 CONNACK codes and MQTT 5 reason codes the tests expect.
const (
	v3OK            = 0x00
	v3BadIdentifier = 0x02
	v3Unavailable   = 0x03
	v3BadLogin      = 0x04
	v3NotAuthorised = 0x05
	v5BadLogin      = 0x86
	v5NotAuthorised = 0x87
	v5QuotaExceeded = 0x97
)

const gwUser, gwPass = "@gateway", "bridge-secret"

// fixture is a broker with the gateway's policy and three tokens.
type fixture struct {
	b       *broker.Broker
	tokens  *auth.Tokens
	secrets map[string]string // token name (= its role) -> secret
	log     *syncBuffer
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer = testbin.Output

// start runs a broker on a free loopback port with the tokens viewer,
// operator and admin, the gateway's policy for the roots holo and
// homeassistant, and the bridge's login, unless o says otherwise.
func start(t testing.TB, o broker.Options) *fixture {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{tokens: toks, secrets: map[string]string{}, log: &syncBuffer{}}
	for _, r := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		secret, _, err := toks.Create(r.String(), r)
		if err != nil {
			t.Fatal(err)
		}
		f.secrets[r.String()] = secret
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	o.Tokens = toks
	if o.Policy == nil {
		if o.Policy, err = policy.New("holo", "homeassistant"); err != nil {
			t.Fatal(err)
		}
	}
	o.Gateway = broker.Credentials{Username: gwUser, Password: gwPass}
	o.Log = slog.New(slog.NewTextHandler(f.log, nil))
	if f.b, err = broker.Start(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Close() })
	return f
}

// as logs a raw client in as role ("" anonymous, "gateway" the bridge).
func (f *fixture) as(t *testing.T, role string, version byte) *raw {
	t.Helper()
	r := dialRaw(t, f.b.Addr())
	l := login{version: version, id: fmt.Sprintf("%s-%d", role, time.Now().UnixNano())}
	switch role {
	case "":
	case "gateway":
		l.user, l.pass = gwUser, gwPass
	default:
		l.user, l.pass = role, f.secrets[role]
	}
	if code := r.connect(l); code != 0 {
		t.Fatalf("%s login refused: %#x", role, code)
	}
	return r
}

// TestLogin: who may connect, with the 3.1.1 and 5 codes of a refusal.
func TestLogin(t *testing.T) {
	f := start(t, broker.Options{})
	anon := start(t, broker.Options{Anonymous: auth.RoleOperator})
	for _, tt := range []struct {
		name   string
		f      *fixture
		l      login
		v3, v5 byte
	}{
		{"token", f, login{user: "admin", pass: f.secrets["admin"]}, v3OK, 0},
		{"wrong secret", f, login{user: "admin", pass: "holo_nope"}, v3BadLogin, v5BadLogin},
		{"another token's secret", f, login{user: "admin", pass: f.secrets["viewer"]}, v3BadLogin, v5BadLogin},
		{"name without secret", f, login{user: "admin"}, v3BadLogin, v5BadLogin},
		{"secret without name", f, login{pass: f.secrets["admin"]}, v3BadLogin, v5BadLogin},
		{"no credentials", f, login{}, v3NotAuthorised, v5NotAuthorised},
		{"bridge", f, login{user: gwUser, pass: gwPass}, v3OK, 0},
		{"bridge, wrong password", f, login{user: gwUser, pass: "guess"}, v3BadLogin, v5BadLogin},
		{"anonymous allowed", anon, login{}, v3OK, 0},
		{"anonymous broker, wrong secret", anon, login{user: "admin", pass: "holo_nope"}, v3BadLogin, v5BadLogin},
	} {
		for _, v := range []byte{4, 5} {
			t.Run(fmt.Sprintf("%s/v%d", tt.name, v), func(t *testing.T) {
				l := tt.l
				l.version, l.id = v, "c-"+strings.ReplaceAll(t.Name(), "/", "-")
				got := dialRaw(t, tt.f.b.Addr()).connect(l)
				want := tt.v3
				if v == 5 {
					want = tt.v5
				}
				if got != want {
					t.Errorf("CONNACK %#x, want %#x", got, want)
				}
			})
		}
	}
	if s := f.b.Stats(); s.RefusedConnects == 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestAnonymousLoopbackOnly: anonymous clients on a listener beyond
// loopback need AnonymousRemote, which warns.
func TestAnonymousLoopbackOnly(t *testing.T) {
	_, err := broker.Start(broker.Options{Addr: "0.0.0.0:0", Anonymous: auth.RoleViewer})
	if !errors.Is(err, broker.ErrConfig) {
		t.Fatalf("anonymous on 0.0.0.0: %v", err)
	}
	_, err = broker.Start(broker.Options{Addr: ":0", Anonymous: auth.RoleViewer})
	if !errors.Is(err, broker.ErrConfig) {
		t.Fatalf("anonymous on :0: %v", err)
	}
	f := start(t, broker.Options{Addr: "0.0.0.0:0", Anonymous: auth.RoleViewer, AnonymousRemote: true})
	if !strings.Contains(f.log.String(), "without credentials may connect from the network") {
		t.Errorf("no warning logged:\n%s", f.log.String())
	}
	if !strings.HasPrefix(f.b.URL(), "tcp://127.0.0.1:") {
		t.Errorf("URL %s", f.b.URL())
	}
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "x"}); code != 0 {
		t.Errorf("anonymous refused: %#x", code)
	}
	// Tokens only: no flag needed beyond loopback.
	g := start(t, broker.Options{Addr: "0.0.0.0:0"})
	if code := dialRaw(t, g.b.Addr()).connect(login{id: "y"}); code != v3NotAuthorised {
		t.Errorf("anonymous on a token-only broker: %#x", code)
	}
	for addr, want := range map[string]bool{"127.0.0.1:1884": true, "[::1]:1": true, "127.1.2.3:0": true,
		"0.0.0.0:1884": false, ":1884": false, "[::]:1": false, "localhost:1884": false, "192.168.1.4:1884": false, "x": false} {
		if got := broker.Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v", addr, got)
		}
	}
}

// TestPublishDecisions: MQTT 5 clients learn in PUBACK what the policy
// refused.
func TestPublishDecisions(t *testing.T) {
	f := start(t, broker.Options{})
	for _, tt := range []struct {
		role, topic, payload string
		ok                   bool
	}{
		{"viewer", "holo/kitchen/set/leds", `{"mode":"off"}`, false},
		{"operator", "holo/kitchen/set/leds", `{"mode":"off"}`, true},
		{"viewer", "holo/bridge/request/boards", `{}`, true},
		{"operator", "holo/bridge/request/rollout", `{"action":"create","plan":{}}`, false},
		{"admin", "holo/bridge/request/rollout", `{"action":"create","plan":{}}`, true},
		{"operator", "holo/bridge/request/rollout", `{"action":"pause","id":"r"}`, true},
		{"operator", "holo/bridge/request/call", `{"board":"k","method":"POST","path":"/ota/pull"}`, false},
		{"operator", "holo/bridge/request/call", `{"board":"k","method":"PATCH","path":"/leds"}`, true},
		{"operator", "holo/kitchen/set/update", `install`, false},
		{"admin", "holo/kitchen/set/update", `install`, true},
		{"admin", "holo/bridge/state", `{"state":"online"}`, false},
		{"admin", "homeassistant/device/holo_1/config", `{}`, false},
		{"admin", "elsewhere/topic", `x`, false},
		{"gateway", "holo/kitchen/set/leds", `{}`, false},
		{"gateway", "holo/bridge/request/call", `{}`, false},
		{"gateway", "holo/kitchen/leds", `{}`, true},
		{"gateway", "homeassistant/device/holo_1/config", `{}`, true},
	} {
		r := f.as(t, tt.role, 5)
		code, err := r.publish(tt.topic, tt.payload, false)
		if err != nil {
			t.Fatalf("%s publishes %s: %v", tt.role, tt.topic, err)
		}
		if got := code < 0x80; got != tt.ok {
			t.Errorf("%s publishes %s %s: PUBACK %#x, want allowed=%v", tt.role, tt.topic, tt.payload, code, tt.ok)
		}
		if !tt.ok && code != v5NotAuthorised {
			t.Errorf("%s publishes %s: PUBACK %#x, want not authorised", tt.role, tt.topic, code)
		}
	}
	if !strings.Contains(f.log.String(), "publication refused") {
		t.Error("refusals not logged")
	}
}

// watcher is an admin session subscribed to everything.
type watcher struct {
	r *raw
}

func (f *fixture) watch(t *testing.T, role string, filters ...string) *watcher {
	t.Helper()
	w := &watcher{f.as(t, role, 4)}
	for i, fl := range filters {
		w.r.subscribe(uint16(i+1), fl)
		if err := w.r.subscribed(uint16(i + 1)); err != nil {
			t.Fatalf("subscribe %s as %s: %v", fl, role, err)
		}
	}
	return w
}

// until returns the topics received before marker.
func (w *watcher) until(t *testing.T, marker string) []string {
	t.Helper()
	var got []string
	for {
		topic, err := w.r.nextPublish()
		if err != nil {
			t.Fatalf("waiting for %s (got %v): %v", marker, got, err)
		}
		if topic == marker {
			return got
		}
		got = append(got, topic)
	}
}

// TestRefusedUnseen: what a 3.1.1 session may not publish is acked and
// reaches no subscriber, the bridge included; what a session may not
// read is not sent to it.
func TestRefusedUnseen(t *testing.T) {
	f := start(t, broker.Options{})
	bridge := f.watch(t, "gateway", "holo/+/set/+", "holo/group/+/set/+", "holo/bridge/request/+")
	admin := f.watch(t, "admin", "holo/#", "homeassistant/#")
	viewer := f.watch(t, "viewer", "#")
	// The subscriptions are in place once a message on them arrives.
	gw := f.as(t, "gateway", 4)
	if _, err := gw.publish("holo/zz/ready", "r", false); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watcher{admin, viewer} {
		w.until(t, "holo/zz/ready")
	}
	op := f.as(t, "operator", 4)
	if _, err := op.publish("holo/bridge/request/health", "{}", false); err != nil {
		t.Fatal(err)
	}
	bridge.until(t, "holo/bridge/request/health")
	admin.until(t, "holo/bridge/request/health")

	vw := f.as(t, "viewer", 4)
	for _, p := range []struct{ topic, payload string }{
		{"holo/kitchen/set/leds", `{"mode":"off"}`},
		{"holo/bridge/request/call", `{"board":"k","method":"POST","path":"/restart"}`},
		{"holo/kitchen/leds", `{}`},
	} {
		if code, err := vw.publish(p.topic, p.payload, false); err != nil || code != 0 {
			t.Fatalf("3.1.1 refusal: PUBACK %#x, %v (want a plain ack)", code, err)
		}
	}
	if _, err := vw.publish("holo/bridge/request/boards", "{}", false); err != nil {
		t.Fatal(err)
	}
	if got := bridge.until(t, "holo/bridge/request/boards"); len(got) != 0 {
		t.Errorf("the bridge was sent a viewer's refused commands: %v", got)
	}
	if got := admin.until(t, "holo/bridge/request/boards"); len(got) != 0 {
		t.Errorf("an admin was sent a viewer's refused commands: %v", got)
	}

	// Reading: the admin's request and a raw call's reply are not the
	// viewer's.
	// Deliveries from one publisher keep its order; from two they need
	// not, so each publisher's last message the viewer may read marks
	// the end of what it sent.
	ad := f.as(t, "admin", 4)
	for _, topic := range []string{"holo/bridge/request/call", "holo/kitchen/set/leds"} {
		if _, err := ad.publish(topic, `{"board":"k","path":"/network"}`, false); err != nil {
			t.Fatal(err)
		}
	}
	got := append(viewer.until(t, "holo/kitchen/set/leds"), "holo/kitchen/set/leds")
	for _, topic := range []string{"holo/bridge/response/call", "holo/bridge/response/boards", "holo/zz/end"} {
		if _, err := gw.publish(topic, `{}`, false); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, viewer.until(t, "holo/zz/end")...)
	slices.Sort(got)
	if want := []string{"holo/bridge/response/boards", "holo/kitchen/set/leds"}; !slices.Equal(got, want) {
		t.Errorf("viewer was sent %v, want %v", got, want)
	}
	if s := f.b.Stats(); s.RefusedPublish != 3 {
		t.Errorf("refused publications %d, want 3", s.RefusedPublish)
	}
}

// TestWill: a will is decided as a publication when the client connects.
func TestWill(t *testing.T) {
	f := start(t, broker.Options{})
	for _, tt := range []struct {
		user, topic string
		want        byte
	}{
		{"viewer", "holo/kitchen/set/leds", v3NotAuthorised},
		{"operator", "holo/bridge/request/rollout", v3NotAuthorised},
		{"admin", "holo/bridge/state", v3NotAuthorised},
		{"operator", "holo/kitchen/set/leds", v3OK},
		{gwUser, "holo/bridge/state", v3OK},
		{gwUser, "holo/kitchen/set/leds", v3NotAuthorised},
	} {
		pass := f.secrets[tt.user]
		if tt.user == gwUser {
			pass = gwPass
		}
		got := dialRaw(t, f.b.Addr()).connect(login{id: "w-" + tt.user + tt.topic, user: tt.user, pass: pass,
			willTopic: tt.topic, will: `{"mode":"off"}`})
		if got != tt.want {
			t.Errorf("%s with a will on %s: CONNACK %#x, want %#x", tt.user, tt.topic, got, tt.want)
		}
	}
}

// TestRevoke: a revoked token's session ends at the next check and its
// secret no longer logs in.
func TestRevoke(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	f := start(t, broker.Options{Clock: clk})
	v3 := f.as(t, "operator", 4)
	v5 := f.as(t, "operator", 5)
	keep := f.as(t, "viewer", 4)
	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the revocation check has no ticker")
	}
	if err := f.tokens.Revoke("operator"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(broker.DefaultRevokeEvery)
	if !v3.closed(5 * time.Second) {
		t.Error("3.1.1 session of a revoked token still open")
	}
	pk, err := v5.read()
	if err != nil || pk.ReasonCode != v5NotAuthorised {
		t.Errorf("MQTT 5 session of a revoked token: %+v %v, want DISCONNECT not authorised", pk.FixedHeader, err)
	}
	if keep.closed(100 * time.Millisecond) {
		t.Error("another token's session ended")
	}
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "again", user: "operator", pass: f.secrets["operator"]}); code != v3BadLogin {
		t.Errorf("revoked secret: CONNACK %#x", code)
	}
	if s := f.b.Stats(); s.Revoked != 2 {
		t.Errorf("revoked sessions %d, want 2", s.Revoked)
	}
}

// TestTakeover: a client id in use is taken over only by the same
// identity.
func TestTakeover(t *testing.T) {
	f := start(t, broker.Options{})
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "shared", user: "operator", pass: f.secrets["operator"]}); code != 0 {
		t.Fatal(code)
	}
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "shared", user: "viewer", pass: f.secrets["viewer"]}); code != v3BadIdentifier {
		t.Errorf("another token took the session: %#x", code)
	}
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "shared", user: "operator", pass: f.secrets["operator"]}); code != 0 {
		t.Errorf("the same token could not take its session back: %#x", code)
	}
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "holo-gateway-1", user: gwUser, pass: gwPass}); code != 0 {
		t.Fatal(code)
	}
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "holo-gateway-1", user: "admin", pass: f.secrets["admin"]}); code != v3BadIdentifier {
		t.Errorf("an admin took the bridge's session: %#x", code)
	}
}

// TestMaxPacket: a packet over the limit ends the connection before its
// body is read, a CONNECT included.
func TestMaxPacket(t *testing.T) {
	f := start(t, broker.Options{Limits: broker.Limits{MaxPacket: 1024}})
	r := f.as(t, "operator", 4)
	if _, err := r.publish("holo/kitchen/set/leds", strings.Repeat("x", 2000), false); err == nil {
		t.Error("an oversize PUBLISH was acked")
	}
	if !r.closed(2 * time.Second) {
		t.Error("connection still open after an oversize PUBLISH")
	}
	// A CONNECT announcing 200 MB: refused from its header alone.
	c := dialRaw(t, f.b.Addr())
	c.write([]byte{0x10, 0x80, 0x80, 0x80, 0x60})
	if !c.closed(2 * time.Second) {
		t.Error("connection still open after an oversize CONNECT header")
	}
	// Under the limit all is well.
	ok := f.as(t, "operator", 5)
	if code, err := ok.publish("holo/kitchen/set/leds", strings.Repeat("x", 900), false); err != nil || code >= 0x80 {
		t.Errorf("a PUBLISH under the limit: %#x %v", code, err)
	}
}

// TestMaxClients: clients beyond the limit are refused; the bridge
// always has its place.
func TestMaxClients(t *testing.T) {
	f := start(t, broker.Options{Limits: broker.Limits{MaxClients: 2}})
	f.as(t, "viewer", 4)
	f.as(t, "operator", 4)
	if code := dialRaw(t, f.b.Addr()).connect(login{id: "third", user: "admin", pass: f.secrets["admin"]}); code != v3Unavailable {
		t.Errorf("third client: CONNACK %#x", code)
	}
	f.as(t, "gateway", 4)
}

// TestRetainedLimits: clients keep at most MaxRetained retained messages
// of at most MaxRetainedSize bytes; commands are never retained.
func TestRetainedLimits(t *testing.T) {
	f := start(t, broker.Options{Policy: broker.Generic{}, Limits: broker.Limits{MaxRetained: 2, MaxRetainedSize: 10}})
	r := f.as(t, "admin", 5)
	for _, tt := range []struct {
		topic, payload string
		want           byte
	}{
		{"a/1", "one", 0},
		{"a/2", "two", 0},
		{"a/3", "three", v5QuotaExceeded},
		{"a/1", "uno", 0},
		{"a/4", strings.Repeat("x", 11), v5QuotaExceeded},
		{"a/1", "", 0}, // clears a/1
		{"a/3", "three", 0},
		{"a/4", "four", v5QuotaExceeded},
	} {
		code, err := r.publish(tt.topic, tt.payload, true)
		if err != nil {
			t.Fatal(err)
		}
		if code >= 0x80 || tt.want != 0 {
			if code != tt.want {
				t.Errorf("retained %s %q: PUBACK %#x, want %#x", tt.topic, tt.payload, code, tt.want)
			}
		}
	}

	g := start(t, broker.Options{})
	op := g.as(t, "operator", 4)
	if _, err := op.publish("holo/kitchen/set/leds", `{"mode":"off"}`, true); err != nil {
		t.Fatal(err)
	}
	gw := g.as(t, "gateway", 4)
	if _, err := gw.publish("holo/zz/marker", "m", true); err != nil {
		t.Fatal(err)
	}
	// Both subscriptions' retained messages queue in order.
	w := g.watch(t, "admin", "holo/kitchen/set/leds", "holo/zz/marker")
	if got := w.until(t, "holo/zz/marker"); len(got) != 0 {
		t.Errorf("a command was retained: %v", got)
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{"": "127.0.0.1:1884", "1999": "127.0.0.1:1999", "0": "127.0.0.1:0",
		"0.0.0.0:1884": "0.0.0.0:1884", ":1884": ":1884"} {
		if got := broker.ListenAddr(in); got != want {
			t.Errorf("ListenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBridgeThrough: paho (what the bridge and most users run) logs in
// with a token, keeps retained messages, and a taken port is ErrListen.
func TestBridgeThrough(t *testing.T) {
	f := start(t, broker.Options{})
	connect := func(user, pass string) (paho.Client, error) {
		o := paho.NewClientOptions().AddBroker(f.b.URL()).SetClientID(fmt.Sprint("t", time.Now().UnixNano())).
			SetUsername(user).SetPassword(pass).SetConnectTimeout(2 * time.Second)
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(3 * time.Second) {
			return nil, errors.New("timeout")
		}
		return c, tok.Error()
	}
	if _, err := connect("admin", "wrong"); err == nil {
		t.Error("a wrong password was accepted")
	}
	gw, err := connect(gwUser, gwPass)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Disconnect(50)
	gw.Publish("holo/kitchen/leds", 1, true, "kept").Wait()
	got := make(chan string, 1)
	v, err := connect("viewer", f.secrets["viewer"])
	if err != nil {
		t.Fatal(err)
	}
	defer v.Disconnect(50)
	v.Subscribe("holo/#", 1, func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) })
	select {
	case p := <-got:
		if p != "kept" {
			t.Errorf("retained %q", p)
		}
	case <-time.After(5 * time.Second):
		t.Error("retained message not delivered")
	}
	if n := f.b.Clients(); n != 2 {
		t.Errorf("clients %d", n)
	}
	if _, err := broker.Start(broker.Options{Addr: f.b.Addr()}); !errors.Is(err, broker.ErrListen) {
		t.Errorf("second broker on %s: %v", f.b.Addr(), err)
	}
}
