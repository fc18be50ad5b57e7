package console

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// command is one console command.
type command struct {
	name string
	// usage lists the command's forms, one each.
	usage []string
	help  string
	run   func(s *call, args []string) (result, error)
}

// commands is the console's command table, in help order.
var commands []command

func init() {
	commands = []command{
		{"help", []string{"help", "help COMMAND"}, "list the commands, or show one command's forms", runHelp},
		{"info", []string{"info"}, "what the board is and how it is doing (GET /info)", runInfo},
		{"restart", []string{"restart [MS]"}, "restart after MS milliseconds (default 500, 200-60000)", runRestart},
		{"leds", []string{"leds", "leds [MODE] [COLOUR] [brightness N] [loop|noloop]"},
			"show or change the LED strip; modes: " + strings.Join(boardapi.LEDModes, ", "), runLEDs},
		{"screen", []string{"screen", "screen show PATH [loop|loops N]", "screen colour COLOUR", "screen calibration", "screen off", "screen backlight N"},
			"show or change what the screen shows", runScreen},
		{"scene", []string{"scene list", "scene apply NAME", "scene end"}, "list, apply or end scenes", runScene},
		{"wifi", []string{"wifi", "wifi scan", "wifi join SSID [PASSPHRASE]", "wifi forget SSID", "wifi ap on|off"},
			"the network: status, networks in range, join, forget, the access point (on stays on)", runWifi},
		{"touch", []string{"touch", "touch on|off", "touch down X Y", "touch up X Y"},
			"touch reporting (until restart); down/up inject a touch at X Y 0-239 (simulator)", runTouch},
		{"password", []string{"password set PASSWORD", "password clear"}, "set or clear the web password", runPassword},
		{"sites", []string{"sites", "sites add ORIGIN", "sites remove ORIGIN"}, "the trusted sites (origins scheme://host[:port])", runSites},
		{"ota", []string{"ota", "ota update PATH|URL [activate]", "ota activate [SLOT]", "ota rollback", "ota cancel", "ota keys"},
			"firmware slots and the update session; update from a host file or http(s) URL; keys: the trusted keys and who signed the running and staged image", runOTA},
		{"link", []string{"link"}, "host link settings and counters", runLink},
		{"log", []string{"log", "log level debug|info|warn|error"}, "show or change the log level (until restart of the process)", runLog},
		{"json", []string{"json", "json on|off"}, "machine output for every command (like --json on each line)", runJSON},
		{"boot", []string{"boot"}, "press the BOOT button: access point on for 5 minutes (simulator)", runBoot},
		{"power", []string{"power off"}, "pull the power: a hard stop, no clean-up (simulator)", runPower},
	}
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func badArgs(format string, a ...any) error { return api.Errorf(ErrBadArguments, format, a...) }

// reply is the result of an API reply shown with the keys picked.
func reply(raw []byte, keys ...string) result {
	return result{json: raw, text: show(raw, keys...)}
}

// ownJSON is the result of a console-only command.
func ownJSON(v any, text string) result {
	b, _ := json.Marshal(v)
	return result{json: b, text: text}
}

func runHelp(s *call, args []string) (result, error) {
	type entry struct {
		Name  string   `json:"name"`
		Usage []string `json:"usage"`
		Help  string   `json:"help"`
	}
	switch len(args) {
	case 0:
		var rows [][]string
		var all []entry
		for _, c := range commands {
			for i, u := range c.usage {
				h := ""
				if i == 0 {
					h = c.help
				}
				rows = append(rows, []string{u, h})
			}
			all = append(all, entry{c.name, c.usage, c.help})
		}
		text := table(rows) + "\nAdd --json to any command for one line of JSON; every result ends with ok or error CODE: MESSAGE."
		return ownJSON(map[string]any{"commands": all}, text), nil
	case 1:
		c, ok := lookupCommand(args[0])
		if !ok {
			return result{}, api.Errorf(ErrUnknownCommand, "unknown command %q; help lists the commands", args[0])
		}
		return ownJSON(entry{c.name, c.usage, c.help}, strings.Join(c.usage, "\n")+"\n  "+c.help), nil
	}
	return result{}, badArgs("help takes at most one command")
}

func noArgs(args []string) error {
	if len(args) > 0 {
		return badArgs("unexpected %q", args[0])
	}
	return nil
}

func runInfo(s *call, args []string) (result, error) {
	if err := noArgs(args); err != nil {
		return result{}, err
	}
	raw, err := s.do(http.MethodGet, "/info", nil)
	if err != nil {
		return result{}, err
	}
	return reply(raw, "hostname", "id", "chip", "firmware.version", "firmware.project", "uptime_s", "heap_free", "features", "extensions",
		"auth", "sta.connected", "sta.ssid", "sta.ip", "ap.on", "ap.name", "ap.off_in_s", "ap.ip"), nil
}

// number parses a whole number argument.
func number(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, badArgs("%s must be a whole number, not %q", name, s)
	}
	return n, nil
}

func runRestart(s *call, args []string) (result, error) {
	body := map[string]int{}
	switch len(args) {
	case 0:
	case 1:
		ms, err := number("MS", args[0])
		if err != nil {
			return result{}, err
		}
		body["delay_ms"] = ms
	default:
		return result{}, badArgs("unexpected %q", args[1])
	}
	raw, err := s.do(http.MethodPost, "/restart", body)
	if err != nil {
		return result{}, err
	}
	return reply(raw), nil
}

func runLEDs(s *call, args []string) (result, error) {
	if len(args) == 0 {
		raw, err := s.do(http.MethodGet, "/leds", nil)
		return reply(raw), err
	}
	var p boardapi.LEDPatch
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(boardapi.LEDModes, a):
			if p.Mode != nil {
				return result{}, badArgs("two modes: %s and %s", *p.Mode, a)
			}
			p.Mode = &a
		case a == "brightness":
			if i+1 >= len(args) {
				return result{}, badArgs("brightness needs a percent")
			}
			i++
			n, err := number("brightness", args[i])
			if err != nil {
				return result{}, err
			}
			p.Brightness = &n
		case a == "loop" || a == "noloop":
			v := a == "loop"
			p.Loop = &v
		default:
			if _, err := boardapi.ParseColour(a); err != nil {
				return result{}, badArgs("%q is neither a mode (%s) nor a colour", a, strings.Join(boardapi.LEDModes, ", "))
			}
			if p.Colour != nil {
				return result{}, badArgs("two colours: %s and %s", *p.Colour, a)
			}
			p.Colour = &a
		}
	}
	raw, err := s.do(http.MethodPatch, "/leds", p)
	return reply(raw), err
}

func runScreen(s *call, args []string) (result, error) {
	if len(args) == 0 {
		raw, err := s.do(http.MethodGet, "/screen", nil)
		return reply(raw), err
	}
	show := map[string]any{}
	switch args[0] {
	case "show":
		if len(args) < 2 {
			return result{}, badArgs("screen show needs a PATH")
		}
		show["path"] = args[1]
		rest := args[2:]
		switch {
		case len(rest) == 0:
		case len(rest) == 1 && rest[0] == "loop":
			show["loop"] = true
		case len(rest) == 1 && rest[0] == "once":
			show["loop"] = false
		case len(rest) == 2 && rest[0] == "loops":
			n, err := number("loops", rest[1])
			if err != nil {
				return result{}, err
			}
			show["loops"] = n
		default:
			return result{}, badArgs("after PATH: loop, once or loops N, not %q", strings.Join(rest, " "))
		}
	case "colour", "color":
		if len(args) != 2 {
			return result{}, badArgs("screen colour needs one COLOUR")
		}
		show["colour"] = args[1]
	case "calibration":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		show["calibration"] = true
	case "off":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodDelete, "/screen", nil)
		return reply(raw), err
	case "backlight":
		if len(args) != 2 {
			return result{}, badArgs("screen backlight needs a percent")
		}
		n, err := number("backlight", args[1])
		if err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodPatch, "/screen", map[string]int{"backlight": n})
		return reply(raw), err
	default:
		return result{}, badArgs("unknown screen command %q", args[0])
	}
	raw, err := s.do(http.MethodPost, "/screen/show", show)
	return reply(raw), err
}

func runScene(s *call, args []string) (result, error) {
	if len(args) == 0 {
		return result{}, badArgs("scene needs list, apply NAME or end")
	}
	switch args[0] {
	case "list":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodGet, "/scenes", nil)
		if err != nil {
			return result{}, err
		}
		var l struct {
			Scenes []struct {
				Name string `json:"name"`
				Slot int    `json:"slot"`
				Then string `json:"then"`
			} `json:"scenes"`
			Active *struct {
				Name *string `json:"name"`
			} `json:"active"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return result{}, err
		}
		rows := [][]string{{"NAME", "SLOT", "THEN"}}
		for _, sc := range l.Scenes {
			slot := "-"
			if sc.Slot > 0 {
				slot = strconv.Itoa(sc.Slot)
			}
			then := sc.Then
			if then == "" {
				then = "stay"
			}
			rows = append(rows, []string{quoteIfNeeded(sc.Name), slot, then})
		}
		text := table(rows)
		if len(l.Scenes) == 0 {
			text = "no saved scenes"
		}
		if l.Active != nil {
			name := "(unsaved)"
			if l.Active.Name != nil {
				name = *l.Active.Name
			}
			text += "\nrunning: " + name
		}
		return result{json: raw, text: text}, nil
	case "apply":
		if len(args) != 2 {
			return result{}, badArgs("scene apply needs one NAME")
		}
		raw, err := s.do(http.MethodPost, "/scenes/apply", map[string]string{"name": args[1]})
		return reply(raw), err
	case "end":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodPost, "/scenes/end", nil)
		return reply(raw), err
	}
	return result{}, badArgs("unknown scene command %q", args[0])
}

func runWifi(s *call, args []string) (result, error) {
	if len(args) == 0 {
		raw, err := s.do(http.MethodGet, "/network", nil)
		return reply(raw), err
	}
	switch args[0] {
	case "scan":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodGet, "/network/scan", nil)
		if err != nil {
			return result{}, err
		}
		var sr struct {
			Networks []struct {
				SSID     string `json:"ssid"`
				RSSI     int    `json:"rssi"`
				Channel  int    `json:"channel"`
				Security string `json:"security"`
				Known    bool   `json:"known"`
			} `json:"networks"`
		}
		if err := json.Unmarshal(raw, &sr); err != nil {
			return result{}, err
		}
		if len(sr.Networks) == 0 {
			return result{json: raw, text: "no networks in range"}, nil
		}
		rows := [][]string{{"SSID", "RSSI", "CH", "SECURITY", "KNOWN"}}
		for _, n := range sr.Networks {
			rows = append(rows, []string{quoteIfNeeded(n.SSID), strconv.Itoa(n.RSSI), strconv.Itoa(n.Channel), n.Security, strconv.FormatBool(n.Known)})
		}
		return result{json: raw, text: table(rows)}, nil
	case "join":
		if len(args) < 2 || len(args) > 3 {
			return result{}, badArgs("wifi join needs SSID and optionally PASSPHRASE")
		}
		body := map[string]string{"ssid": args[1]}
		if len(args) == 3 {
			body["passphrase"] = args[2]
		}
		raw, err := s.do(http.MethodPost, "/network/join", body)
		return reply(raw, "sta_enabled", "joined.*", "ap.on"), err
	case "forget":
		if len(args) != 2 {
			return result{}, badArgs("wifi forget needs one SSID")
		}
		raw, err := s.do(http.MethodDelete, "/network/known?ssid="+url.QueryEscape(args[1]), nil)
		return reply(raw), err
	case "ap":
		if len(args) != 2 || (args[1] != "on" && args[1] != "off") {
			return result{}, badArgs("wifi ap needs on or off")
		}
		raw, err := s.do(http.MethodPatch, "/network/ap", map[string]bool{"on": args[1] == "on"})
		return reply(raw, "ap.*"), err
	}
	return result{}, badArgs("unknown wifi command %q", args[0])
}

type touchState struct {
	Reporting bool `json:"reporting"`
}

func runTouch(s *call, args []string) (result, error) {
	if len(args) > 0 && (args[0] == "down" || args[0] == "up") {
		if len(args) != 3 {
			return result{}, badArgs("touch %s needs X and Y", args[0])
		}
		x, err := number("X", args[1])
		if err != nil {
			return result{}, err
		}
		y, err := number("Y", args[2])
		if err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodPost, "/sim/touch", map[string]any{"action": args[0], "x": x, "y": y})
		return reply(raw), err
	}
	t, err := s.target()
	if err != nil {
		return result{}, err
	}
	if t.Touch == nil {
		return result{}, api.Errorf(ErrNotAvailable, "touch reporting is not available on this firmware")
	}
	switch {
	case len(args) == 0:
	case len(args) == 1 && (args[0] == "on" || args[0] == "off"):
		t.Touch.SetReporting(args[0] == "on")
	default:
		return result{}, badArgs("touch takes on, off, or down|up X Y")
	}
	on := t.Touch.Reporting()
	text := "reporting  off"
	if on {
		text = "reporting  on"
	}
	return ownJSON(touchState{on}, text), nil
}

func runPassword(s *call, args []string) (result, error) {
	var body string
	switch {
	case len(args) == 2 && args[0] == "set":
		b, _ := json.Marshal(args[1])
		body = `{"password":` + string(b) + `}`
	case len(args) == 1 && args[0] == "clear":
		body = `{"password":null}`
	default:
		return result{}, badArgs("password takes set PASSWORD or clear")
	}
	raw, err := s.do(http.MethodPatch, "/web", json.RawMessage(body))
	return reply(raw, "password_set"), err
}

func runSites(s *call, args []string) (result, error) {
	raw, err := s.do(http.MethodGet, "/web", nil)
	if err != nil {
		return result{}, err
	}
	var st struct {
		Sites []string `json:"trusted_sites"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return result{}, err
	}
	list := func(raw []byte) (result, error) {
		if err := json.Unmarshal(raw, &st); err != nil {
			return result{}, err
		}
		js, _ := json.Marshal(map[string][]string{"trusted_sites": st.Sites})
		text := strings.Join(st.Sites, "\n")
		if len(st.Sites) == 0 {
			text = "no trusted sites"
		}
		return result{json: js, text: text}, nil
	}
	if len(args) == 0 {
		return list(raw)
	}
	if len(args) != 2 || (args[0] != "add" && args[0] != "remove") {
		return result{}, badArgs("sites takes add ORIGIN or remove ORIGIN")
	}
	origin := args[1]
	i := slices.Index(st.Sites, origin)
	next := slices.Clone(st.Sites)
	if next == nil {
		next = []string{}
	}
	switch {
	case args[0] == "add" && i >= 0:
		return result{}, api.Errorf(api.ErrExists, "%s is already trusted", origin)
	case args[0] == "add":
		next = append(next, origin)
	case i < 0:
		return result{}, api.Errorf(api.ErrNotFound, "%s is not in the list", origin)
	default:
		next = slices.Delete(next, i, i+1)
	}
	raw, err = s.do(http.MethodPatch, "/web", map[string][]string{"trusted_sites": next})
	if err != nil {
		return result{}, err
	}
	return list(raw)
}

func runOTA(s *call, args []string) (result, error) {
	if len(args) == 0 {
		raw, err := s.do(http.MethodGet, "/ota", nil)
		if err != nil {
			return result{}, err
		}
		var st ota.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			return result{}, err
		}
		rows := [][]string{{"SLOT", "RUNNING", "BOOTS", "STATE", "VERSION"}}
		for _, sl := range st.Slots {
			state, version := "-", "-"
			if sl.State != nil {
				state = *sl.State
			}
			if sl.App != nil {
				version = sl.App.Version
			}
			rows = append(rows, []string{sl.Label, strconv.FormatBool(sl.Running), strconv.FormatBool(sl.Boots), state, version})
		}
		text := table(rows) + "\n" + fields([]field{{"rollback", strconv.FormatBool(st.Rollback)},
			{"session", st.Session.State + " (" + st.Session.Source + ")"}})
		return result{json: raw, text: text}, nil
	}
	sessionKeys := []string{"state", "source", "slot", "bytes", "total", "sha256", "app.version", "boots_next", "error"}
	switch args[0] {
	case "update":
		if len(args) < 2 || len(args) > 3 || (len(args) == 3 && args[2] != "activate") {
			return result{}, badArgs("ota update needs PATH or URL, then optionally activate")
		}
		return s.otaUpdate(args[1], len(args) == 3, sessionKeys)
	case "activate":
		if len(args) > 2 {
			return result{}, badArgs("ota activate takes at most a SLOT")
		}
		body := ota.ActivateRequest{}
		if len(args) == 2 {
			body.Slot = &args[1]
		}
		raw, err := s.do(http.MethodPost, "/ota/activate", body)
		return reply(raw, "slot", "app.version", "restart_in_ms"), err
	case "rollback":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodGet, "/ota", nil)
		if err != nil {
			return result{}, err
		}
		var st ota.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			return result{}, err
		}
		if !st.Rollback {
			return result{}, ErrNoRollback
		}
		for _, sl := range st.Slots {
			if !sl.Running {
				label := sl.Label
				raw, err := s.do(http.MethodPost, "/ota/activate", ota.ActivateRequest{Slot: &label})
				return reply(raw, "slot", "app.version", "restart_in_ms"), err
			}
		}
		return result{}, ErrNoRollback
	case "cancel":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		raw, err := s.do(http.MethodDelete, "/ota/image", nil)
		return reply(raw, sessionKeys...), err
	case "keys":
		if err := noArgs(args[1:]); err != nil {
			return result{}, err
		}
		return s.otaKeys()
	}
	return result{}, badArgs("unknown ota command %q", args[0])
}

// otaKeys shows the trusted keys (GET /ota's secure_boot) and the keys
// that signed the running and the staged image, each marked trusted,
// revoked or unknown.
func (s *call) otaKeys() (result, error) {
	raw, err := s.do(http.MethodGet, "/ota", nil)
	if err != nil {
		return result{}, err
	}
	var st ota.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return result{}, err
	}
	sb := st.SecureBoot
	var b strings.Builder
	if !sb.Enabled {
		b.WriteString("secure boot  off: no key burned, images are not checked\n")
	} else {
		fmt.Fprintf(&b, "secure boot  on: %d key(s) burned\n", len(sb.Keys))
		rows := [][]string{{"SLOT", "KEY DIGEST", "REVOKED"}}
		for i, k := range sb.Keys {
			rows = append(rows, []string{strconv.Itoa(i), k.Digest, strconv.FormatBool(k.Revoked)})
		}
		b.WriteString(table(rows) + "\n")
	}
	status := func(d string) string {
		for _, k := range sb.Keys {
			if k.Digest == d {
				if k.Revoked {
					return d + " (revoked)"
				}
				return d + " (trusted)"
			}
		}
		return d + " (not trusted)"
	}
	var rows [][]string
	for _, sl := range st.Slots {
		var what string
		switch {
		case sl.Running:
			what = "running"
		case st.Session.Slot != nil && *st.Session.Slot == sl.Label && (st.Session.State == ota.StateStaged || st.Session.State == ota.StateActive):
			what = "staged"
		default:
			continue
		}
		version := "-"
		if sl.App != nil {
			version = sl.App.Version
		}
		signers := []string{"none"}
		if len(sl.Signers) > 0 {
			signers = signers[:0]
			for _, d := range sl.Signers {
				signers = append(signers, status(d))
			}
		}
		rows = append(rows, []string{what, sl.Label, version, "signed by " + strings.Join(signers, ", ")})
	}
	b.WriteString(table(rows))
	return result{json: raw, text: strings.TrimRight(b.String(), "\n")}, nil
}

// otaUpdate sends an image from a host file or an http(s) URL through
// PUT /ota/image, marked so that the session's source is console.
func (s *call) otaUpdate(src string, activate bool, keys []string) (result, error) {
	var body io.Reader
	var length int64
	if u, err := url.Parse(src); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, src, nil)
		if err != nil {
			return result{}, badArgs("bad URL: %v", err)
		}
		resp, err := s.c.o.Client.Do(req)
		if err != nil {
			return result{}, api.Errorf(api.ErrUnreachable, "fetching %s: %v", src, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return result{}, api.Errorf(api.ErrUnreachable, "fetching %s: %s", src, resp.Status)
		}
		body, length = resp.Body, resp.ContentLength
		if length < 0 {
			// The session needs the length first: read the image whole
			// (never more than a slot).
			b, err := io.ReadAll(io.LimitReader(resp.Body, flash.SlotSize+1))
			if err != nil {
				return result{}, api.Errorf(api.ErrUnreachable, "fetching %s: %v", src, err)
			}
			body, length = strings.NewReader(string(b)), int64(len(b))
		}
	} else {
		f, err := os.Open(src)
		if err != nil {
			return result{}, api.Errorf(api.ErrNotFound, "%v", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return result{}, api.Errorf(api.ErrNotFound, "%v", err)
		}
		if !fi.Mode().IsRegular() {
			return result{}, api.Errorf(api.ErrBadRequest, "%s is not a file", src)
		}
		body, length = f, fi.Size()
	}
	path := "/ota/image"
	if activate {
		path += "?activate=true"
	}
	raw, err := s.doCtx(ota.WithSource(s.ctx, ota.SourceConsole), http.MethodPut, path, bodyReader{r: body, length: length})
	return reply(raw, keys...), err
}

func runLink(s *call, args []string) (result, error) {
	if err := noArgs(args); err != nil {
		return result{}, err
	}
	raw, err := s.do(http.MethodGet, "/link", nil)
	return reply(raw, "transport", "running.mode", "running.protocol", "running.address", "running.groups",
		"running.events.kinds", "running.events.push", "restart_required", "counters.*"), err
}

func runLog(s *call, args []string) (result, error) {
	lv := s.c.o.Level
	if lv == nil {
		return result{}, api.Errorf(ErrNotAvailable, "the log level is fixed in this build")
	}
	switch {
	case len(args) == 0:
	case len(args) == 2 && args[0] == "level":
		var l slog.Level
		if err := l.UnmarshalText([]byte(args[1])); err != nil {
			return result{}, badArgs("level must be debug, info, warn or error, not %q", args[1])
		}
		lv.Set(l)
	default:
		return result{}, badArgs("log takes level LEVEL")
	}
	name := strings.ToLower(lv.Level().String())
	return ownJSON(map[string]string{"level": name}, "level  "+name), nil
}

func runJSON(s *call, args []string) (result, error) {
	switch {
	case len(args) == 0:
	case len(args) == 1 && (args[0] == "on" || args[0] == "off"):
		s.c.mu.Lock()
		s.c.json = args[0] == "on"
		s.c.mu.Unlock()
	default:
		return result{}, badArgs("json takes on or off")
	}
	s.c.mu.Lock()
	on := s.c.json
	s.c.mu.Unlock()
	return ownJSON(map[string]bool{"json": on}, fmt.Sprintf("json  %v", onOff(on))), nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func runBoot(s *call, args []string) (result, error) {
	if err := noArgs(args); err != nil {
		return result{}, err
	}
	if _, err := s.do(http.MethodPost, "/sim/boot", nil); err != nil {
		return result{}, err
	}
	raw, err := s.do(http.MethodGet, "/network", nil)
	if err != nil {
		// The button was pressed; the network may not be built in.
		return result{}, nil
	}
	return reply(raw, "ap.*"), nil
}

func runPower(s *call, args []string) (result, error) {
	if len(args) != 1 || args[0] != "off" {
		return result{}, badArgs("power takes off")
	}
	raw, err := s.do(http.MethodPost, "/sim/power", nil)
	if err != nil {
		return result{}, err
	}
	return result{json: raw, text: "power off"}, nil
}
