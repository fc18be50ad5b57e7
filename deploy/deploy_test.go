// Package deploy_test checks the deployment files as far as a machine
// without a container engine allows: the compose file parses and
// references files and flags that exist, the Dockerfile is multi-stage,
// static and non-root, the systemd units verify and start binaries with
// flags they have, and Prometheus accepts its configuration.
package deploy_test

import (
	"bufio"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

// binaries returns the directory of the commands, built once per test
// binary: TestMain starts the build at once, so that the tests that need
// no binary run meanwhile.
var (
	buildOnce sync.Once
	buildDone = make(chan struct{})
	binDir    string
	buildErr  error
	buildOut  []byte
)

func build() {
	buildOnce.Do(func() {
		defer close(buildDone)
		binDir, buildErr = os.MkdirTemp("", "holofleet-deploy-test")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "./cmd/holo-gateway", "./cmd/holo-board", "./cmd/holoctl")
		cmd.Dir = ".."
		buildOut, buildErr = cmd.CombinedOutput()
	})
}

func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the commands")
	}
	go build()
	<-buildDone
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binDir
}

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		go build()
	}
	code := m.Run()
	if !testing.Short() {
		<-buildDone
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}
	os.Exit(code)
}

var helpFlag = regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`)

// flagsOf returns the flags `bin args... --help` lists.
func flagsOf(t *testing.T, bin string, args ...string) []string {
	t.Helper()
	out, _ := exec.Command(filepath.Join(binaries(t), bin), append(args, "--help")...).CombinedOutput()
	var flags []string
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("%s %v --help lists no flags:\n%s", bin, args, out)
	}
	return flags
}

var usedFlag = regexp.MustCompile(`(?:^|\s|")--?([a-z][a-z0-9-]*)`)

// checkFlags fails for each flag in words that bin does not have.
func checkFlags(t *testing.T, where, bin string, words string, have []string) {
	t.Helper()
	for _, m := range usedFlag.FindAllStringSubmatch(words, -1) {
		if !slices.Contains(have, m[1]) {
			t.Errorf("%s: %s has no flag --%s (it has %v)", where, bin, m[1], have)
		}
	}
}

type compose struct {
	Services map[string]struct {
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Image       string   `yaml:"image"`
		Command     []string `yaml:"command"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestCompose(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"gateway", "mosquitto", "prometheus", "grafana"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("no %s service", s)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: build: %v", name, err)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s: volume %s: %v", name, v, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s: named volume %s is not declared", name, src)
			}
		}
	}
	gw := c.Services["gateway"]
	if len(gw.Command) == 0 || gw.Command[0] != "demo" {
		t.Fatalf("gateway command %v: want the demo installation", gw.Command)
	}
	checkFlags(t, "compose gateway command", "holo-gateway", strings.Join(gw.Command[1:], " "), flagsOf(t, "holo-gateway", "demo"))
	// The gateway's health check asks its readiness with the image's own
	// binary, on the port it listens on.
	if gw.Healthcheck == nil || len(gw.Healthcheck.Test) < 3 || gw.Healthcheck.Test[0] != "CMD" ||
		gw.Healthcheck.Test[1] != "/usr/local/bin/holo-gateway" || gw.Healthcheck.Test[2] != "health" ||
		!slices.Contains(gw.Healthcheck.Test, "--ready") || !slices.Contains(gw.Healthcheck.Test, "http://127.0.0.1:8480") {
		t.Errorf("gateway healthcheck %+v: want holo-gateway health --ready on 127.0.0.1:8480", gw.Healthcheck)
	} else {
		checkFlags(t, "compose gateway healthcheck", "holo-gateway", strings.Join(gw.Healthcheck.Test[3:], " "), flagsOf(t, "holo-gateway", "health"))
	}
	// Mosquitto's health check is run against a real broker with the
	// shipped configuration in TestMosquittoHealthcheck.
	if mq := c.Services["mosquitto"]; mq.Healthcheck == nil || len(mq.Healthcheck.Test) != 2 || mq.Healthcheck.Test[0] != "CMD-SHELL" {
		t.Errorf("mosquitto healthcheck %+v: want one CMD-SHELL line", mq.Healthcheck)
	}
	// The commented command for real boards uses real flags too.
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "# command:") || strings.HasPrefix(l, `#           "--`) {
			checkFlags(t, "compose commented command", "holo-gateway", l, flagsOf(t, "holo-gateway"))
		}
	}
	// Prometheus scrapes the gateway's service and port.
	prom, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prom), `"gateway:8480"`) || !slices.Contains(gw.Ports, "8480:8480") {
		t.Error("prometheus.yml does not scrape gateway:8480, or the gateway does not publish 8480")
	}

	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Log("no docker client: compose.yaml parsed and checked only")
		return
	}
	if err := exec.Command(docker, "compose", "version").Run(); err != nil {
		t.Log("the docker client has no compose plugin: compose.yaml parsed and checked only")
		return
	}
	if out, err := exec.Command(docker, "compose", "-f", "compose.yaml", "config", "--quiet").CombinedOutput(); err != nil {
		t.Errorf("docker compose config: %v\n%s", err, out)
	}
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	var froms, users []string
	sc := bufio.NewScanner(strings.NewReader(df))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			users = append(users, f[1])
		}
	}
	if len(froms) < 2 {
		t.Errorf("not multi-stage: FROM %v", froms)
	}
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1], "root") || strings.HasPrefix(users[len(users)-1], "0") {
		t.Errorf("the final image runs as %v, want a non-root user", users)
	}
	if !strings.Contains(df, "CGO_ENABLED=0") {
		t.Error("binaries are not static (CGO_ENABLED=0)")
	}
	for _, m := range regexp.MustCompile(`\./cmd/([a-z-]+)`).FindAllStringSubmatch(df, -1) {
		if _, err := os.Stat(filepath.Join("..", "cmd", m[1])); err != nil {
			t.Errorf("builds %s: %v", m[0], err)
		}
	}
	// The health check runs the gateway's own probe with flags it has.
	if m := regexp.MustCompile(`(?m)^\s+CMD \["/usr/local/bin/holo-gateway", "health",(.*)\]$`).FindStringSubmatch(df); m != nil &&
		strings.Contains(df, "HEALTHCHECK ") {
		checkFlags(t, "Dockerfile HEALTHCHECK", "holo-gateway", m[1], flagsOf(t, "holo-gateway", "health"))
	} else {
		t.Error("no HEALTHCHECK running holo-gateway health")
	}
	// The default command's flags exist.
	if m := regexp.MustCompile(`(?m)^CMD (.*)$`).FindStringSubmatch(df); m != nil {
		checkFlags(t, "Dockerfile CMD", "holo-gateway", m[1], flagsOf(t, "holo-gateway"))
	} else {
		t.Error("no CMD")
	}
}

// unit reads a systemd unit or environment file into key → values.
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' || l[0] == ';' || l[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Errorf("%s: not key=value: %q", path, l)
			continue
		}
		out[k] = append(out[k], v)
	}
	return out
}

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ unit, env, bin string }{
		{"systemd/holo-gateway.service", "systemd/holo-gateway.env", "holo-gateway"},
		{"systemd/holo-board.service", "systemd/holo-board.env", "holo-board"},
	} {
		u := unit(t, tc.unit)
		env := unit(t, tc.env)
		exec0 := u["ExecStart"]
		if len(exec0) != 1 {
			t.Errorf("%s: ExecStart %v", tc.unit, exec0)
			continue
		}
		bin := strings.Fields(exec0[0])[0]
		if filepath.Base(bin) != tc.bin {
			t.Errorf("%s: starts %s, want %s", tc.unit, bin, tc.bin)
		}
		if !slices.Contains(u["EnvironmentFile"], "/etc/holofleet/"+filepath.Base(tc.env)) {
			t.Errorf("%s: EnvironmentFile %v does not name %s", tc.unit, u["EnvironmentFile"], filepath.Base(tc.env))
		}
		flags := flagsOf(t, tc.bin)
		checkFlags(t, tc.unit+" ExecStart", tc.bin, exec0[0], flags)
		// Every variable the unit uses is set by the env file (or systemd).
		for _, m := range regexp.MustCompile(`\$\{?([A-Z_]+)\}?`).FindAllStringSubmatch(exec0[0], -1) {
			if _, ok := env[m[1]]; !ok && m[1] != "STATE_DIRECTORY" {
				t.Errorf("%s uses $%s, which %s does not set", tc.unit, m[1], tc.env)
			}
		}
		// Flags in the env file's values, commented examples included.
		raw, _ := os.ReadFile(tc.env)
		for _, l := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "# "), "="); ok && strings.HasSuffix(k, "_FLAGS") {
				checkFlags(t, tc.env, tc.bin, v, flags)
			}
		}
		if u["User"] == nil && !slices.Contains(u["DynamicUser"], "yes") {
			t.Errorf("%s runs as root", tc.unit)
		}
		analyze, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Log("systemd-analyze not installed: units parsed only")
			continue
		}
		// Verify a copy that starts the binary just built.
		dir := t.TempDir()
		body, _ := os.ReadFile(tc.unit)
		copyPath := filepath.Join(dir, filepath.Base(tc.unit))
		if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(body), bin, filepath.Join(binaries(t), tc.bin))), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify %s: %v\n%s", tc.unit, err, out)
		}
	}
}

func TestMosquittoConfig(t *testing.T) {
	raw, err := os.ReadFile("mosquitto/mosquitto.conf")
	if err != nil {
		t.Fatal(err)
	}
	known := []string{"listener", "allow_anonymous", "persistence", "persistence_location", "log_dest", "password_file", "acl_file"}
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' {
			continue
		}
		if k := strings.Fields(l)[0]; !slices.Contains(known, k) {
			t.Errorf("mosquitto.conf: unexpected option %q", k)
		}
	}
	if !strings.Contains(string(raw), "listener 1883") {
		t.Error("no listener on 1883, where the compose gateway connects")
	}
	// Mosquitto listens beyond loopback here: logins only.
	if !regexp.MustCompile(`(?m)^allow_anonymous false$`).Match(raw) || regexp.MustCompile(`(?m)^allow_anonymous true`).Match(raw) {
		t.Error("mosquitto.conf lets anonymous clients in")
	}
}

// TestEnvFilesInstalledPrivate: every instruction that installs an env
// file (they may hold passwords) installs it mode 0600, and no env file
// puts a password in a flag.
func TestEnvFilesInstalledPrivate(t *testing.T) {
	install := regexp.MustCompile(`install\s[^\n]*?\.env\b`)
	found := 0
	for _, f := range []string{"systemd/README.md", "systemd/holo-gateway.service", "systemd/holo-board.service", "README.md"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range install.FindAllString(string(raw), -1) {
			found++
			if !strings.Contains(m, "-m 600") {
				t.Errorf("%s: %q installs an env file without -m 600", f, m)
			}
		}
	}
	if found < 4 {
		t.Errorf("found %d env file installs, want the gateway's and the board's in the README and the units", found)
	}
	for _, f := range []string{"systemd/holo-gateway.env", "systemd/holo-board.env"} {
		raw, _ := os.ReadFile(f)
		if regexp.MustCompile(`(?i)--[a-z-]*password\s|https?://[^\s/]*:[^\s/@]+@`).Match(raw) {
			t.Errorf("%s passes a password on the command line", f)
		}
	}
}
