package deploy_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"gopkg.in/yaml.v3"
)

// mosquittoBin finds a Mosquitto binary; absent, the test is skipped (it
// fails in CI, which installs them).
func mosquittoBin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); fileExists(p) {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (CI installs mosquitto and mosquitto-clients)", name)
	}
	t.Skipf("%s is not installed (apt-get install mosquitto mosquitto-clients): the ACL file is not tried", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// secrets runs make-secrets.sh into a temporary directory and returns it
// with the logins' passwords.
func secrets(t *testing.T) (string, map[string]string) {
	t.Helper()
	passwd := mosquittoBin(t, "mosquitto_passwd")
	dir := filepath.Join(t.TempDir(), "secrets")
	run := func() string {
		cmd := exec.Command("sh", "mosquitto/make-secrets.sh")
		cmd.Env = append(os.Environ(), "SECRETS="+dir, "PATH="+filepath.Dir(passwd)+":"+os.Getenv("PATH"),
			// Keep the files readable by this test when it runs as root.
			fmt.Sprintf("MOSQUITTO_UID=%d", os.Getuid()), fmt.Sprintf("GATEWAY_UID=%d", os.Getuid()))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make-secrets.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	run()
	pw := map[string]string{}
	for _, login := range []string{"holo-gateway", "homeassistant", "viewer", "operator", "admin"} {
		p := filepath.Join(dir, login+".password")
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pw[login] = strings.TrimSpace(string(raw))
		if len(pw[login]) < 32 {
			t.Errorf("%s: password of %d characters", login, len(pw[login]))
		}
	}
	for _, f := range []string{"passwd", "admin.password", "holo-gateway.password"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "passwd"))
	if strings.Contains(string(raw), pw["admin"]) {
		t.Error("the password file holds a password in clear")
	}
	// A second run keeps what the first made.
	if out := run(); !strings.Contains(out, "kept") {
		t.Errorf("second run: %s", out)
	}
	raw2, _ := os.ReadFile(filepath.Join(dir, "passwd"))
	if string(raw) != string(raw2) {
		t.Error("a second run changed the password file")
	}
	return dir, pw
}

// startMosquitto runs Mosquitto with the shipped configuration and ACL
// file on a free loopback port and returns its address.
func startMosquitto(t *testing.T, secretsDir string) string {
	t.Helper()
	bin := mosquittoBin(t, "mosquitto")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	raw, err := os.ReadFile("mosquitto/mosquitto.conf")
	if err != nil {
		t.Fatal(err)
	}
	acl, _ := filepath.Abs("mosquitto/acl")
	var conf []string
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
			continue
		case f[0] == "listener":
			l = "listener " + strconv.Itoa(port) + " 127.0.0.1"
		case f[0] == "password_file":
			l = "password_file " + filepath.Join(secretsDir, "passwd")
		case f[0] == "acl_file":
			l = "acl_file " + acl
		case f[0] == "persistence":
			l = "persistence false"
		case f[0] == "persistence_location", f[0] == "log_dest":
			continue
		}
		conf = append(conf, l)
	}
	conf = append(conf, "log_dest stderr", "log_type error", "log_type warning")
	if os.Getuid() == 0 {
		conf = append(conf, "user root") // read the test's files, not as the mosquitto user
	}
	cf := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(cf, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cf)
	var log strings.Builder
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mosquitto log:\n%s", log.String())
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("mosquitto did not listen on %s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reader is a paho session recording the topics it receives.
type reader struct {
	c      paho.Client
	mu     sync.Mutex
	topics []string
}

func mqttLogin(addr, user, pass string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(fmt.Sprintf("acl-%s-%d", user, time.Now().UnixNano())).
		SetUsername(user).SetPassword(pass).SetConnectTimeout(3 * time.Second).SetAutoReconnect(false)
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(5 * time.Second) {
		return nil, fmt.Errorf("connect timed out")
	}
	return c, tok.Error()
}

// TestMosquittoACL runs the shipped Mosquitto configuration, ACL file
// and password recipe in the real Mosquitto and checks, login by login,
// what each may publish and read.
// TestMosquittoHealthcheck runs compose's health check of Mosquitto (the
// shell line, pointed at the test's port) against a broker with the
// shipped configuration: healthy while it runs, unhealthy once it stops.
// The broker takes no anonymous logins, so the check must not need one.
func TestMosquittoHealthcheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Mosquitto")
	}
	t.Parallel()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	hc := c.Services["mosquitto"].Healthcheck
	if hc == nil || len(hc.Test) != 2 || hc.Test[0] != "CMD-SHELL" {
		t.Fatalf("mosquitto healthcheck %+v: want one CMD-SHELL line", hc)
	}
	mosquittoBin(t, "mosquitto_pub")
	dir, _ := secrets(t)
	addr := startMosquitto(t, dir)
	_, port, _ := net.SplitHostPort(addr)
	line := strings.Replace(hc.Test[1], "-h 127.0.0.1", "-h 127.0.0.1 -p "+port, 1)
	if line == hc.Test[1] {
		t.Fatalf("healthcheck %q does not name -h 127.0.0.1", hc.Test[1])
	}
	if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil {
		t.Fatalf("healthcheck against a running broker: %v %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, free, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	if err := exec.Command("sh", "-c", strings.Replace(hc.Test[1], "-h 127.0.0.1", "-h 127.0.0.1 -p "+free, 1)).Run(); err == nil {
		t.Error("healthcheck passed with no broker listening")
	}
}

func TestMosquittoACL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Mosquitto")
	}
	t.Parallel()
	dir, pw := secrets(t)
	addr := startMosquitto(t, dir)
	pub := mosquittoBin(t, "mosquitto_pub")

	// Logins only.
	if _, err := mqttLogin(addr, "", ""); err == nil {
		t.Error("an anonymous client connected")
	}
	if _, err := mqttLogin(addr, "admin", "guess"); err == nil {
		t.Error("a wrong password was accepted")
	}

	// Publishing: MQTT 5 clients get "not authorized" in PUBACK.
	host, port, _ := net.SplitHostPort(addr)
	mayPublish := func(user, topic string) bool {
		out, err := exec.Command(pub, "-V", "mqttv5", "-q", "1", "-h", host, "-p", port, "-u", user, "-P", pw[user],
			"-t", topic, "-m", "{}").CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_pub as %s on %s: %v\n%s", user, topic, err, out)
		}
		return !strings.Contains(strings.ToLower(string(out)), "not authorized")
	}
	writes := []struct {
		topic string
		who   []string // who may publish it
	}{
		{"holo/kitchen/set/leds", []string{"homeassistant", "operator", "admin"}},
		{"holo/kitchen/set/scene", []string{"homeassistant", "operator", "admin"}},
		{"holo/kitchen/set/restart", []string{"admin"}},
		{"holo/kitchen/set/update", []string{"admin"}},
		{"holo/kitchen/set/settings", []string{"admin"}},
		{"holo/group/1/set/leds", []string{"operator", "admin"}},
		{"holo/bridge/request/scene", []string{"operator", "admin"}},
		{"holo/bridge/request/boards", []string{"operator", "admin"}},
		{"holo/bridge/request/call", []string{"admin"}},
		{"holo/bridge/request/rollout", []string{"admin"}},
		{"holo/kitchen/leds", []string{"holo-gateway"}},
		{"holo/bridge/state", []string{"holo-gateway"}},
		{"holo/bridge/gateway/hall/state", []string{"holo-gateway"}},
		{"holo/bridge/gateway/hall/boards", []string{"holo-gateway"}},
		{"holo/bridge/response/call", []string{"holo-gateway"}},
		{"homeassistant/device/holo_1/config", []string{"holo-gateway"}},
		{"homeassistant/status", []string{"homeassistant", "operator", "admin"}},
		{"elsewhere/topic", nil},
	}
	logins := []string{"holo-gateway", "homeassistant", "viewer", "operator", "admin"}
	for _, w := range writes {
		for _, user := range logins {
			if got, want := mayPublish(user, w.topic), slices.Contains(w.who, user); got != want {
				t.Errorf("%s publishes %s: allowed=%v, want %v", user, w.topic, got, want)
			}
		}
	}

	// Reading: every login subscribes to all it might see; the bridge
	// and an admin publish one message on each topic, then a last one.
	readers := map[string]*reader{}
	for _, user := range logins {
		c, err := mqttLogin(addr, user, pw[user])
		if err != nil {
			t.Fatalf("%s logs in: %v", user, err)
		}
		defer c.Disconnect(50)
		r := &reader{c: c}
		filters := map[string]byte{"holo/#": 0, "homeassistant/#": 0}
		if user == "holo-gateway" {
			filters = map[string]byte{"holo/+/set/+": 0, "holo/group/+/set/+": 0, "holo/bridge/request/+": 0, "homeassistant/status": 0}
		}
		tok := c.SubscribeMultiple(filters, func(_ paho.Client, m paho.Message) {
			r.mu.Lock()
			r.topics = append(r.topics, m.Topic())
			r.mu.Unlock()
		})
		if !tok.WaitTimeout(5 * time.Second) {
			t.Fatal("subscribe timed out")
		}
		readers[user] = r
	}
	reads := []struct {
		topic, by string
		who       []string // who may read it
	}{
		{"holo/kitchen/leds", "holo-gateway", []string{"homeassistant", "viewer", "operator", "admin"}},
		{"holo/bridge/state", "holo-gateway", []string{"homeassistant", "viewer", "operator", "admin"}},
		{"holo/bridge/response/boards", "holo-gateway", []string{"homeassistant", "viewer", "operator", "admin"}},
		{"holo/bridge/response/call", "holo-gateway", []string{"admin"}},
		{"homeassistant/device/holo_1/config", "holo-gateway", []string{"homeassistant", "viewer", "operator", "admin"}},
		{"holo/kitchen/set/leds", "admin", []string{"holo-gateway", "homeassistant", "viewer", "operator", "admin"}},
		{"holo/bridge/request/call", "admin", []string{"holo-gateway", "admin"}},
		{"holo/bridge/request/rollout", "admin", []string{"holo-gateway", "admin"}},
		{"holo/bridge/request/scene", "admin", []string{"holo-gateway", "operator", "admin"}},
		{"homeassistant/status", "admin", []string{"holo-gateway", "homeassistant", "viewer", "operator", "admin"}},
	}
	for _, r := range reads {
		if !mayPublish(r.by, r.topic) {
			t.Fatalf("%s may not publish %s", r.by, r.topic)
		}
	}
	// The last messages: one each from the bridge and the admin, which
	// every reader reads (each publisher's messages arrive in order).
	last := map[string]string{"holo-gateway": "holo/zz/end", "admin": "holo/group/9/set/end"}
	for by, topic := range last {
		if !mayPublish(by, topic) {
			t.Fatalf("%s may not publish %s", by, topic)
		}
	}
	for _, user := range logins {
		r := readers[user]
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.mu.Lock()
			got := slices.Clone(r.topics)
			r.mu.Unlock()
			done := slices.Contains(got, last["admin"]) && (user == "holo-gateway" || slices.Contains(got, last["holo-gateway"]))
			if done {
				for _, rd := range reads {
					if seen, want := slices.Contains(got, rd.topic), slices.Contains(rd.who, user); seen != want {
						t.Errorf("%s reads %s (published by %s): %v, want %v", user, rd.topic, rd.by, seen, want)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not get the last messages; got %v", user, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestACLDocumented: docs/mqtt-security.md shows the ACL file as shipped.
func TestACLDocumented(t *testing.T) {
	acl, err := os.ReadFile("mosquitto/acl")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/mqtt-security.md")
	if err != nil {
		t.Fatal(err)
	}
	// The fenced block after the "acl" marker line.
	sc := bufio.NewScanner(strings.NewReader(string(doc)))
	var block []string
	in, found := false, false
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !found && strings.HasPrefix(l, "```") && strings.Contains(l, "deploy/mosquitto/acl"):
			in, found = true, true
		case in && l == "```":
			in = false
		case in:
			block = append(block, l)
		}
	}
	if !found {
		t.Fatal("docs/mqtt-security.md has no block marked deploy/mosquitto/acl")
	}
	if got, want := strings.Join(block, "\n")+"\n", string(acl); got != want {
		t.Error("docs/mqtt-security.md's copy of deploy/mosquitto/acl differs from the file")
	}
}

// TestMosquittoWithGateway runs holo-gateway's demo against Mosquitto
// with the shipped ACL file and password recipe, as the compose file
// does: the bridge comes online, Home Assistant's login sees discovery
// and state, an operator's show command reaches the boards.
func TestMosquittoWithGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Mosquitto and holo-gateway")
	}
	t.Parallel()
	dir, pw := secrets(t)
	addr := startMosquitto(t, dir)
	bin := filepath.Join(binaries(t), "holo-gateway")
	cmd := exec.Command(bin, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2", "--demo-groups", "1",
		"--mqtt", "tcp://"+addr, "--mqtt-user", "holo-gateway", "--mqtt-password-file", filepath.Join(dir, "holo-gateway.password"),
		"--mqtt-accept", "admin")
	out := &lockedOutput{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("holo-gateway:\n%s", out.String())
		}
	}()

	ha, err := mqttLogin(addr, "homeassistant", pw["homeassistant"])
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Disconnect(50)
	var mu sync.Mutex
	got := map[string]string{}
	ha.SubscribeMultiple(map[string]byte{"homeassistant/#": 1, "holo/#": 1}, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		got[m.Topic()] = string(m.Payload())
		mu.Unlock()
	}).WaitTimeout(5 * time.Second)
	waitFor := func(what string, ok func(map[string]string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			done := ok(got)
			mu.Unlock()
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var board string
	waitFor("bridge online and discovery", func(m map[string]string) bool {
		// The two boards' devices, and the demo show's "GO demo" button
		// (its own device, holo_show).
		disc := 0
		for k, v := range m {
			if strings.HasPrefix(k, "homeassistant/device/") && k != "homeassistant/device/holo_show/config" {
				disc++
			}
			if strings.HasSuffix(k, "/availability") && strings.Contains(v, "online") {
				board = strings.Split(k, "/")[1]
			}
		}
		return m["holo/bridge/state"] == `{"state":"online"}` && disc == 2 && board != "" &&
			strings.Contains(m["homeassistant/device/holo_show/config"], `"GO demo"`)
	})
	op, err := mqttLogin(addr, "operator", pw["operator"])
	if err != nil {
		t.Fatal(err)
	}
	defer op.Disconnect(50)
	op.Publish("holo/group/1/set/leds", 1, false, `{"mode":"solid","colour":"#00ff00"}`).WaitTimeout(5 * time.Second)
	waitFor("the boards' green LEDs", func(m map[string]string) bool { return strings.Contains(m["holo/"+board+"/leds"], "00ff00") })
	if strings.Contains(out.String(), "readable by others") {
		t.Error("the gateway found its password file readable by others")
	}
}

// lockedOutput collects a process's output while the test reads it.
type lockedOutput struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
