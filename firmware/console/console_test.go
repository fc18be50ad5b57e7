package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/ota"
)

func newReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// seen is one request a fake route received.
type seen struct {
	Method, Path, Body string
	Console            bool
	Source             string
}

// fakeBoot answers every route with a canned reply and records requests.
type fakeBoot struct {
	routes  map[string]string // "METHOD /path" -> reply body ("" = 204)
	errs    map[string]*api.Error
	got     []seen
	touch   *Touch
	restart bool
}

func (f *fakeBoot) target() (Target, bool) {
	if f.restart {
		return Target{}, false
	}
	return Target{Lookup: f.lookup, Touch: f.touch}, true
}

func (f *fakeBoot) lookup(method, path string) (api.Route, bool) {
	key := method + " " + path
	replyBody, ok := f.routes[key]
	if !ok {
		return api.Route{}, false
	}
	return api.Route{Method: method, Path: path, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		src := ""
		if r.Method == http.MethodPut {
			src = ota.SourceOf(r) // what ota's handler records
		}
		f.got = append(f.got, seen{r.Method, r.URL.RequestURI(), string(b), Via(r), src})
		if e := f.errs[key]; e != nil {
			api.WriteError(w, e)
			return
		}
		if replyBody == "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		api.WriteJSON(w, http.StatusOK, json.RawMessage(replyBody))
	})}, true
}

type emitted struct {
	kind   string
	fields any
}

type fakeHub struct{ got []emitted }

func (h *fakeHub) Emit(kind string, fields any) events.Happening {
	h.got = append(h.got, emitted{kind, fields})
	return events.Happening{}
}

func newFake() (*fakeBoot, *fakeHub) {
	hub := &fakeHub{}
	return &fakeBoot{touch: NewTouch(hub), errs: map[string]*api.Error{}, routes: map[string]string{
		"GET /info":             `{"hostname":"holo-ab12","id":"02ab12","firmware":{"version":"1.2.0"},"features":["leds","screen"],"extensions":["fire","time"],"auth":false,"sta":{"connected":true,"ssid":"host"},"ap":{"on":false,"off_in_s":null}}`,
		"POST /restart":         `{"restart_in_ms":500}`,
		"GET /leds":             `{"mode":"off","colour":"#ffffff","loop":false,"brightness":50}`,
		"PATCH /leds":           `{"mode":"rainbow","colour":"#ff0000","loop":true,"brightness":40}`,
		"GET /screen":           `{"powered":true,"backlight":80,"showing":"nothing"}`,
		"POST /screen/show":     `{"powered":true,"backlight":80,"showing":"colour","colour":"#ff0000"}`,
		"PATCH /screen":         `{"powered":true,"backlight":30,"showing":"nothing"}`,
		"DELETE /screen":        `{"powered":false,"backlight":0,"showing":"nothing"}`,
		"GET /scenes":           `{"scenes":[{"name":"intro","slot":3,"then":"restore"},{"name":"the end"}],"active":null}`,
		"POST /scenes/apply":    `{"name":"intro"}`,
		"POST /scenes/end":      `{"name":"intro","by":"end"}`,
		"GET /network":          `{"sta_enabled":true,"joined":null,"known":[],"ap":{"on":true,"off_in_s":300}}`,
		"GET /network/scan":     `{"networks":[{"ssid":"Stage Left","rssi":-50,"channel":6,"security":"wpa2","known":false}]}`,
		"POST /network/join":    `{"sta_enabled":true,"joined":{"ssid":"Stage Left"},"known":[],"ap":{"on":false}}`,
		"DELETE /network/known": `{"sta_enabled":true,"joined":null,"known":[],"ap":{"on":false}}`,
		"PATCH /network/ap":     `{"sta_enabled":true,"joined":null,"known":[],"ap":{"on":true,"off_in_s":null}}`,
		"PATCH /web":            `{"hostname":"holo-ab12","password_set":true,"trusted_sites":["https://a.example","https://b.example"]}`,
		"GET /web":              `{"hostname":"holo-ab12","password_set":false,"trusted_sites":["https://a.example"]}`,
		"GET /ota":              `{"rollback":true,"slots":[{"label":"ota_0","running":true,"boots":true,"state":"confirmed","app":{"version":"1.2.0"}},{"label":"ota_1","running":false,"boots":false,"state":"confirmed","app":{"version":"1.1.0"}}],"session":{"state":"idle","source":"none"}}`,
		"PUT /ota/image":        `{"state":"staged","source":"console"}`,
		"POST /ota/activate":    `{"slot":"ota_1","restart_in_ms":1000}`,
		"DELETE /ota/image":     `{"state":"idle","source":"none"}`,
		"GET /link":             `{"transport":"/dev/pts/3","running":{"mode":"uart"},"counters":{"lines":2}}`,
		"POST /sim/boot":        ``,
		"POST /sim/touch":       ``,
		"POST /sim/power":       ``,
	}}, hub
}

func exec(c *Console, line string) string {
	var b bytes.Buffer
	c.Exec(context.Background(), line, &b)
	return b.String()
}

func TestCommandsCallTheAPI(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fw.bin")
	if err := os.WriteFile(img, []byte("image bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string
		want []seen // requests, in order
	}{
		{"info", []seen{{"GET", "/api/v1/info", "", true, ""}}},
		{"restart", []seen{{"POST", "/api/v1/restart", `{}`, true, ""}}},
		{"restart 2000", []seen{{"POST", "/api/v1/restart", `{"delay_ms":2000}`, true, ""}}},
		{"leds", []seen{{"GET", "/api/v1/leds", "", true, ""}}},
		{"leds rainbow #ff0000 brightness 40 loop", []seen{{"PATCH", "/api/v1/leds", `{"mode":"rainbow","colour":"#ff0000","loop":true,"brightness":40}`, true, ""}}},
		{"leds noloop", []seen{{"PATCH", "/api/v1/leds", `{"loop":false}`, true, ""}}},
		{"screen", []seen{{"GET", "/api/v1/screen", "", true, ""}}},
		{"screen show /clips/a.mov loops 3", []seen{{"POST", "/api/v1/screen/show", `{"loops":3,"path":"/clips/a.mov"}`, true, ""}}},
		{"screen show /a.gif loop", []seen{{"POST", "/api/v1/screen/show", `{"loop":true,"path":"/a.gif"}`, true, ""}}},
		{"screen colour red", []seen{{"POST", "/api/v1/screen/show", `{"colour":"red"}`, true, ""}}},
		{"screen calibration", []seen{{"POST", "/api/v1/screen/show", `{"calibration":true}`, true, ""}}},
		{"screen off", []seen{{"DELETE", "/api/v1/screen", "", true, ""}}},
		{"screen backlight 30", []seen{{"PATCH", "/api/v1/screen", `{"backlight":30}`, true, ""}}},
		{"scene list", []seen{{"GET", "/api/v1/scenes", "", true, ""}}},
		{`scene apply "the end"`, []seen{{"POST", "/api/v1/scenes/apply", `{"name":"the end"}`, true, ""}}},
		{"scene end", []seen{{"POST", "/api/v1/scenes/end", "", true, ""}}},
		{"wifi", []seen{{"GET", "/api/v1/network", "", true, ""}}},
		{"wifi scan", []seen{{"GET", "/api/v1/network/scan", "", true, ""}}},
		{`wifi join "Stage Left"`, []seen{{"POST", "/api/v1/network/join", `{"ssid":"Stage Left"}`, true, ""}}},
		{`wifi join "Stage Left" s3cretpass`, []seen{{"POST", "/api/v1/network/join", `{"passphrase":"s3cretpass","ssid":"Stage Left"}`, true, ""}}},
		{`wifi forget "Stage Left"`, []seen{{"DELETE", "/api/v1/network/known?ssid=Stage+Left", "", true, ""}}},
		{"wifi ap on", []seen{{"PATCH", "/api/v1/network/ap", `{"on":true}`, true, ""}}},
		{"wifi ap off", []seen{{"PATCH", "/api/v1/network/ap", `{"on":false}`, true, ""}}},
		{"touch down 10 239", []seen{{"POST", "/api/v1/sim/touch", `{"action":"down","x":10,"y":239}`, true, ""}}},
		{"touch up 0 0", []seen{{"POST", "/api/v1/sim/touch", `{"action":"up","x":0,"y":0}`, true, ""}}},
		{`password set "two words"`, []seen{{"PATCH", "/api/v1/web", `{"password":"two words"}`, true, ""}}},
		{"password clear", []seen{{"PATCH", "/api/v1/web", `{"password":null}`, true, ""}}},
		{"sites", []seen{{"GET", "/api/v1/web", "", true, ""}}},
		{"sites add https://b.example", []seen{{"GET", "/api/v1/web", "", true, ""}, {"PATCH", "/api/v1/web", `{"trusted_sites":["https://a.example","https://b.example"]}`, true, ""}}},
		{"sites remove https://a.example", []seen{{"GET", "/api/v1/web", "", true, ""}, {"PATCH", "/api/v1/web", `{"trusted_sites":[]}`, true, ""}}},
		{"ota", []seen{{"GET", "/api/v1/ota", "", true, ""}}},
		{"ota update " + img, []seen{{"PUT", "/api/v1/ota/image", "image bytes", true, "console"}}},
		{"ota update " + img + " activate", []seen{{"PUT", "/api/v1/ota/image?activate=true", "image bytes", true, "console"}}},
		{"ota activate", []seen{{"POST", "/api/v1/ota/activate", `{}`, true, ""}}},
		{"ota activate ota_0", []seen{{"POST", "/api/v1/ota/activate", `{"slot":"ota_0"}`, true, ""}}},
		{"ota rollback", []seen{{"GET", "/api/v1/ota", "", true, ""}, {"POST", "/api/v1/ota/activate", `{"slot":"ota_1"}`, true, ""}}},
		{"ota cancel", []seen{{"DELETE", "/api/v1/ota/image", "", true, ""}}},
		{"ota keys", []seen{{"GET", "/api/v1/ota", "", true, ""}}},
		{"link", []seen{{"GET", "/api/v1/link", "", true, ""}}},
		{"boot", []seen{{"POST", "/api/v1/sim/boot", "", true, ""}, {"GET", "/api/v1/network", "", true, ""}}},
		{"power off", []seen{{"POST", "/api/v1/sim/power", "", true, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			f, _ := newFake()
			c := New(Options{Target: f.target, Level: new(slog.LevelVar)})
			out := exec(c, tt.line)
			if !strings.HasSuffix(out, "\nok\n") && out != "ok\n" {
				t.Errorf("output does not end in ok:\n%s", out)
			}
			if diff := cmp.Diff(f.got, tt.want); diff != "" {
				t.Errorf("requests (-got +want):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{"fly", `error unknown_command: unknown command "fly"; help lists the commands`},
		{"help fly", `error unknown_command: unknown command "fly"; help lists the commands`},
		{"info now", `error bad_arguments: unexpected "now" (usage: info)`},
		{"restart soon", `error bad_arguments: MS must be a whole number, not "soon" (usage: restart [MS])`},
		{"leds blink", `error bad_arguments: "blink" is neither a mode (off, solid, wipe, rainbow, flicker) nor a colour (usage: leds | leds [MODE] [COLOUR] [brightness N] [loop|noloop])`},
		{"leds brightness", `error bad_arguments: brightness needs a percent (usage: leds | leds [MODE] [COLOUR] [brightness N] [loop|noloop])`},
		{"screen show", "error bad_arguments: screen show needs a PATH"},
		{"screen show /a loops x", "error bad_arguments: loops must be a whole number"},
		{"screen show /a forever", "error bad_arguments: after PATH: loop, once or loops N"},
		{"screen dance", `error bad_arguments: unknown screen command "dance"`},
		{"scene", "error bad_arguments: scene needs list"},
		{"wifi ap maybe", "error bad_arguments: wifi ap needs on or off"},
		{"wifi join", "error bad_arguments: wifi join needs SSID"},
		{"touch sideways", "error bad_arguments: touch takes on, off, or down|up X Y"},
		{"touch down 1", "error bad_arguments: touch down needs X and Y"},
		{"password", "error bad_arguments: password takes set PASSWORD or clear"},
		{"sites add https://a.example", "error exists: https://a.example is already trusted"},
		{"sites remove https://z.example", "error not_found: https://z.example is not in the list"},
		{"ota update /nonexistent/fw.bin", "error not_found: open /nonexistent/fw.bin"},
		{"ota update a b", "error bad_arguments: ota update needs PATH or URL"},
		{"log level loud", `error bad_arguments: level must be debug, info, warn or error, not "loud"`},
		{"json maybe", "error bad_arguments: json takes on or off"},
		{"power on", "error bad_arguments: power takes off"},
		{`wifi join "open`, "error bad_arguments: console: unterminated quote"},
		{"screen show /missing.mov", "error not_found: /missing.mov does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			f, _ := newFake()
			f.errs["POST /screen/show"] = api.Errorf(api.ErrNotFound, "/missing.mov does not exist")
			c := New(Options{Target: f.target, Level: new(slog.LevelVar)})
			out := exec(c, tt.line)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tt.want) {
				t.Errorf("got %q, want one line starting %q", out, tt.want)
			}
		})
	}
}

func TestNotAvailableAndRestarting(t *testing.T) {
	f, _ := newFake()
	delete(f.routes, "POST /scenes/apply")
	f.touch = nil
	c := New(Options{Target: f.target, RestartWait: 20 * time.Millisecond})
	for line, want := range map[string]string{
		"scene apply intro": "error not_available: POST /scenes/apply is not available on this firmware\n",
		"touch on":          "error not_available: touch reporting is not available on this firmware\n",
		"log level debug":   "error not_available: the log level is fixed in this build\n",
	} {
		if got := exec(c, line); got != want {
			t.Errorf("%s: got %q, want %q", line, got, want)
		}
	}
	f.restart = true
	if got := exec(c, "info"); got != "error restarting: the board is restarting\n" {
		t.Errorf("while restarting: %q", got)
	}
}

func TestOutput(t *testing.T) {
	f, _ := newFake()
	c := New(Options{Target: f.target, Level: new(slog.LevelVar)})
	tests := []struct{ line, want string }{
		{"leds", "mode        off\ncolour      #ffffff\nloop        false\nbrightness  50\nok\n"},
		{"leds --json", `{"mode":"off","colour":"#ffffff","loop":false,"brightness":50}` + "\nok\n"},
		{"info", "hostname          holo-ab12\nid                02ab12\nfirmware.version  1.2.0\nfeatures          leds, screen\nextensions        fire, time\nauth              false\nsta.connected     true\nsta.ssid          host\nap.on             false\nap.off_in_s       -\nok\n"},
		{"scene list", "NAME       SLOT  THEN\nintro      3     restore\n\"the end\"  -     stay\nok\n"},
		{"wifi scan", "SSID          RSSI  CH  SECURITY  KNOWN\n\"Stage Left\"  -50   6   wpa2      false\nok\n"},
		{"sites", "https://a.example\nok\n"},
		{"sites --json", `{"trusted_sites":["https://a.example"]}` + "\nok\n"},
		{"ota", "SLOT   RUNNING  BOOTS  STATE      VERSION\nota_0  true     true   confirmed  1.2.0\nota_1  false    false  confirmed  1.1.0\nrollback  true\nsession   idle (none)\nok\n"},
		{"touch", "reporting  off\nok\n"},
		{"touch on", "reporting  on\nok\n"},
		{"touch --json", `{"reporting":true}` + "\nok\n"},
		{"touch down 5 6 --json", "{}\nok\n"},
		{"log level debug", "level  debug\nok\n"},
		{"json on", `{"json":true}` + "\nok\n"},
		{"touch", `{"reporting":true}` + "\nok\n"},
		{"json off", "json  off\nok\n"},
		{"", ""},
		{"# a comment", ""},
	}
	for _, tt := range tests {
		if got := exec(c, tt.line); got != tt.want {
			t.Errorf("%q:\n%s\nwant:\n%s", tt.line, got, tt.want)
		}
	}
}

// TestOTAKeys shows the burned keys and who signed the running and the
// staged image, on a board with secure boot and on an open one.
func TestOTAKeys(t *testing.T) {
	aa, bb, cc := strings.Repeat("aa", 32), strings.Repeat("bb", 32), strings.Repeat("cc", 32)
	f, _ := newFake()
	f.routes["GET /ota"] = `{"rollback":false,"slots":[` +
		`{"label":"ota_0","running":true,"boots":true,"state":"confirmed","app":{"version":"1.2.0"},"signers":["` + aa + `","` + cc + `"]},` +
		`{"label":"ota_1","running":false,"boots":false,"state":null,"app":{"version":"2.0.0"},"signers":["` + bb + `"]}],` +
		`"session":{"state":"staged","source":"upload","slot":"ota_1"},` +
		`"secure_boot":{"enabled":true,"keys":[{"digest":"` + aa + `","revoked":true},{"digest":"` + bb + `","revoked":false}]}}`
	c := New(Options{Target: f.target, Level: new(slog.LevelVar)})
	want := "secure boot  on: 2 key(s) burned\n" +
		"SLOT  KEY DIGEST                                                        REVOKED\n" +
		"0     " + aa + "  true\n" +
		"1     " + bb + "  false\n" +
		"running  ota_0  1.2.0  signed by " + aa + " (revoked), " + cc + " (not trusted)\n" +
		"staged   ota_1  2.0.0  signed by " + bb + " (trusted)\nok\n"
	if got := exec(c, "ota keys"); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	f, _ = newFake()
	f.routes["GET /ota"] = `{"rollback":false,"slots":[{"label":"ota_0","running":true,"boots":true,"state":"confirmed","app":{"version":"1.2.0"}}],` +
		`"session":{"state":"idle","source":"none"},"secure_boot":{"enabled":false,"keys":[]}}`
	c = New(Options{Target: f.target, Level: new(slog.LevelVar)})
	want = "secure boot  off: no key burned, images are not checked\nrunning  ota_0  1.2.0  signed by none\nok\n"
	if got := exec(c, "ota keys"); got != want {
		t.Errorf("open board, got:\n%s\nwant:\n%s", got, want)
	}
	if got := exec(c, "ota keys now"); !strings.HasPrefix(got, "error bad_arguments") {
		t.Errorf("extra argument: %q", got)
	}
}

func TestHelpCoversEveryCommand(t *testing.T) {
	c := New(Options{Target: func() (Target, bool) { return Target{}, false }})
	all := exec(c, "help")
	for _, cmd := range commands {
		for _, u := range cmd.usage {
			if !strings.Contains(all, u) {
				t.Errorf("help lacks %q", u)
			}
		}
		one := exec(c, "help "+cmd.name)
		if !strings.HasPrefix(one, cmd.usage[0]) || !strings.HasSuffix(one, "\nok\n") {
			t.Errorf("help %s: %q", cmd.name, one)
		}
	}
	var h struct {
		Commands []struct{ Name string } `json:"commands"`
	}
	out := exec(c, "help --json")
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &h); err != nil || len(h.Commands) != len(commands) {
		t.Errorf("help --json: %q %v", out, err)
	}
}

func TestTouchReporting(t *testing.T) {
	hub := &fakeHub{}
	tr := NewTouch(hub)
	tr.Handle(hal.TouchEvent{Down: true, X: 1, Y: 2})
	var sb frame.StatusBlock
	tr.Status(&sb)
	if len(hub.got) != 0 || sb.Flags&frame.FlagTouch != 0 {
		t.Fatalf("reporting off: emitted %v, flags %02x", hub.got, sb.Flags)
	}
	tr.SetReporting(true)
	tr.Handle(hal.TouchEvent{Down: true, X: 1, Y: 2})
	tr.Handle(hal.TouchEvent{Down: false, X: 239, Y: 0})
	tr.Status(&sb)
	want := []emitted{{events.KindTouch, TouchEvent{"down", 1, 2}}, {events.KindTouch, TouchEvent{"up", 239, 0}}}
	if diff := cmp.Diff(hub.got, want, cmp.AllowUnexported(emitted{})); diff != "" {
		t.Errorf("happenings (-got +want):\n%s", diff)
	}
	if sb.Flags&frame.FlagTouch == 0 {
		t.Errorf("flag bit 0 not set: %02x", sb.Flags)
	}
}

func TestServe(t *testing.T) {
	f, _ := newFake()
	c := New(Options{Target: f.target})
	in := "info --json\r\nfly\r\n\r\nleds\n"
	var out bytes.Buffer
	p := &Port{r: strings.NewReader(in), w: &out, name: "test", nl: "\r\n", echo: true, stdio: true}
	if err := c.Serve(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(out.String(), "\r\n")
	want := []string{
		"holo> info --json",
		`{"hostname":"holo-ab12","id":"02ab12","firmware":{"version":"1.2.0"},"features":["leds","screen"],"extensions":["fire","time"],"auth":false,"sta":{"connected":true,"ssid":"host"},"ap":{"on":false,"off_in_s":null}}`,
		"ok",
		"holo> fly",
		`error unknown_command: unknown command "fly"; help lists the commands`,
		"holo> ",
		"holo> leds",
		"mode        off", "colour      #ffffff", "loop        false", "brightness  50",
		"ok",
		"holo> ",
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("transcript (-got +want):\n%s", diff)
	}
}

func TestOTAUpdateSource(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fw.bin")
	if err := os.WriteFile(img, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var source string
	target := func() (Target, bool) {
		return Target{Lookup: func(method, path string) (api.Route, bool) {
			return api.Route{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				source = ota.SourceOf(r)
				api.WriteJSON(w, http.StatusOK, map[string]string{"state": "staged", "source": source})
			})}, true
		}}, true
	}
	c := New(Options{Target: target})
	if out := exec(c, "ota update "+img); !strings.HasSuffix(out, "ok\n") || source != ota.SourceConsole {
		t.Errorf("ota update: %q, source %q", out, source)
	}
}

func BenchmarkExec(b *testing.B) {
	f, _ := newFake()
	c := New(Options{Target: f.target})
	b.ReportAllocs()
	for b.Loop() {
		f.got = f.got[:0]
		c.Exec(context.Background(), "leds rainbow brightness 40", io.Discard)
	}
}
