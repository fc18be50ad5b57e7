package main

// holoctl fw and holoctl rollout: the gateway's firmware store, release
// channels and staged rollouts over its REST API (/v1/artifacts,
// /v1/channels, /v1/rollouts), with the gw commands' client and flags.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const fwUsage = `holoctl fw COMMAND ... [flags]
  upload FILE [--name N]              upload an image (verified by the gateway; admin)
  list                                the stored images, newest first, with their trust and signers
                                      (trusted: signed by a key the gateway trusts; signed; unsigned)
  get SHA                             one image (SHA: the sha256 or a unique prefix)
  delete SHA                          remove an image no channel or rollout uses (admin)
  channel NAME SHA [--release-url U]  point a release channel at an image (admin)
  channels                            the release channels
flags (anywhere):`

const rolloutUsage = `holoctl rollout COMMAND ... [flags]
  dry-run PLAN.json          who each wave would update, who is refused and why
  create PLAN.json           start a rollout (admin); PLAN.json "-" reads stdin
  list                       every rollout, newest first
  get ID                     one rollout with its progress
  boards ID                  its boards with their last step (-o json: timelines)
  pause ID [--reason R]      start no more boards (operator)
  resume ID                  continue a paused rollout (admin)
  abort ID [--reason R]      stop for good, discard staged images (operator)
  revert ID [--reason R]     abort and put updated boards back (admin)
  watch ID [--after N] [--follow]   its events until it finishes (--follow: on)
PLAN.json is the engine's plan: {"artifact": SHA, "target": {"all": true},
"canaries": [...], "waves": [{"count": 1}, {"percent": 50}], "timeouts":
{"restart": "2m"}, "thresholds": {"wave_failure": 0.5, "action": "revert"}, ...}
flags (anywhere):`

// fwOpts are the flags of fw and rollout, besides the gateway's.
type fwOpts struct {
	name, releaseURL, reason string
	after                    uint64
	follow                   bool
}

// parseFw parses flags anywhere among args and returns the client, the
// options and the positional arguments.
func parseFw(name, usage string, args []string, stderr io.Writer) (*gwClient, *fwOpts, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	o := &fwOpts{}
	fs.StringVar(&o.name, "name", "", "file name kept with an upload (default: the file's)")
	fs.StringVar(&o.releaseURL, "release-url", "", "release notes URL of a channel")
	fs.StringVar(&o.reason, "reason", "", "why (pause, abort, revert)")
	fs.Uint64Var(&o.after, "after", 0, "watch: also replay kept events after this n")
	fs.BoolVar(&o.follow, "follow", false, "watch: keep watching after the rollout finished")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, nil, usageErr(err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if c.output != "table" && c.output != "json" {
		return nil, nil, nil, fmt.Errorf("%w: -o table or -o json", errUsage)
	}
	if len(pos) == 0 {
		fs.Usage()
		return nil, nil, nil, fmt.Errorf("%w: a %s command is needed", errUsage, name)
	}
	return c, o, pos, nil
}

func nArgs(pos []string, n int, form string) error {
	if len(pos) != n {
		return fmt.Errorf("%w: %s", errUsage, form)
	}
	return nil
}

// fwArtifact is an artifact as the API writes it (64-bit numbers are
// JSON strings).
type fwArtifact struct {
	SHA256 string `json:"sha256"`
	Size   string `json:"size"`
	Chip   int    `json:"chip"`
	App    struct {
		Project string `json:"project"`
		Version string `json:"version"`
		Date    string `json:"date"`
		Time    string `json:"time"`
	} `json:"app"`
	Name    string     `json:"name"`
	Added   *time.Time `json:"added"`
	Signers []struct {
		KeyDigest string `json:"key_digest"`
		Valid     bool   `json:"valid"`
		Trusted   bool   `json:"trusted"`
		Error     string `json:"error"`
	} `json:"signers"`
	// Trust is "trusted", "signed" or "unsigned".
	Trust string `json:"trust"`
}

// signerList is the artifact's signature blocks in one short cell: the
// key of each block, marked "!" when the block does not verify; "-" when
// there is none.
func (a fwArtifact) signerList() string {
	var out []string
	for _, s := range a.Signers {
		d := s.KeyDigest[:min(16, len(s.KeyDigest))]
		if !s.Valid {
			d += "!"
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// trust is the artifact's trust, "unsigned" from a gateway that does not
// say.
func (a fwArtifact) trust() string {
	if a.Trust == "" {
		return "unsigned"
	}
	return a.Trust
}

type fwChannel struct {
	Name       string     `json:"name"`
	SHA256     string     `json:"sha256"`
	Version    string     `json:"version"`
	ReleaseURL string     `json:"release_url"`
	Updated    *time.Time `json:"updated"`
}

func runFirmware(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, o, pos, err := parseFw("fw", fwUsage, args, stderr)
	if err != nil {
		return err
	}
	switch pos[0] {
	case "upload":
		if err := nArgs(pos, 2, "fw upload FILE [--name N]"); err != nil {
			return err
		}
		return c.upload(ctx, pos[1], o.name, stdout)
	case "list":
		var arts []fwArtifact
		raw, err := c.call(ctx, "GET", "/v1/artifacts", nil, &arts)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SHA256\tVERSION\tTRUST\tSIGNERS\tSIZE\tNAME\tADDED")
		for _, a := range arts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short(a.SHA256), a.App.Version, a.trust(), a.signerList(), a.Size, a.Name, when(a.Added))
		}
		return tw.Flush()
	case "get", "delete":
		if err := nArgs(pos, 2, "fw "+pos[0]+" SHA"); err != nil {
			return err
		}
		sha, err := c.resolveSHA(ctx, pos[1])
		if err != nil {
			return err
		}
		if pos[0] == "delete" {
			if _, err := c.call(ctx, "DELETE", "/v1/artifacts/"+sha, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted %s\n", sha)
			return nil
		}
		var a fwArtifact
		raw, err := c.call(ctx, "GET", "/v1/artifacts/"+sha, nil, &a)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		return printArtifact(stdout, a, false)
	case "channel":
		if err := nArgs(pos, 3, "fw channel NAME SHA [--release-url U]"); err != nil {
			return err
		}
		sha, err := c.resolveSHA(ctx, pos[2])
		if err != nil {
			return err
		}
		var ch fwChannel
		raw, err := c.call(ctx, "PUT", "/v1/channels/"+url.PathEscape(pos[1]), map[string]string{"sha256": sha, "release_url": o.releaseURL}, &ch)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		fmt.Fprintf(stdout, "channel %s -> %s (%s)\n", ch.Name, ch.SHA256, ch.Version)
		return nil
	case "channels":
		var chs []fwChannel
		raw, err := c.call(ctx, "GET", "/v1/channels", nil, &chs)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHANNEL\tVERSION\tSHA256\tUPDATED\tRELEASE")
		for _, ch := range chs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ch.Name, ch.Version, short(ch.SHA256), when(ch.Updated), ch.ReleaseURL)
		}
		return tw.Flush()
	}
	return fmt.Errorf("%w: unknown fw command %q", errUsage, pos[0])
}

// upload streams the file to POST /v1/artifacts.
func (c *gwClient) upload(ctx context.Context, file, name string, stdout io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if name == "" {
		name = filepath.Base(file)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(c.base, "/")+"/v1/artifacts?name="+url.QueryEscape(name), f)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("User-Agent", userAgent())
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		e := &gwError{Status: resp.StatusCode}
		if json.Unmarshal(raw, e) != nil || e.Code == "" {
			e.Code, e.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(raw))
		}
		return e
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	var up struct {
		Artifact fwArtifact `json:"artifact"`
		Existed  bool       `json:"existed"`
	}
	if err := json.Unmarshal(raw, &up); err != nil {
		return fmt.Errorf("gateway: bad reply: %w", err)
	}
	return printArtifact(stdout, up.Artifact, up.Existed)
}

func printArtifact(w io.Writer, a fwArtifact, existed bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("sha256", a.SHA256)
	row("version", a.App.Version)
	row("project", a.App.Project)
	row("built", strings.TrimSpace(a.App.Date+" "+a.App.Time))
	row("size", a.Size)
	row("chip", strconv.Itoa(a.Chip))
	row("name", a.Name)
	row("added", when(a.Added))
	row("trust", a.trust())
	for _, sg := range a.Signers {
		v := sg.KeyDigest
		switch {
		case !sg.Valid:
			v += "  does not verify: " + sg.Error
		case sg.Trusted:
			v += "  verifies, trusted by the gateway"
		default:
			v += "  verifies, not a key the gateway trusts"
		}
		row("signer", v)
	}
	if existed {
		row("note", "already stored; nothing written")
	}
	return tw.Flush()
}

// resolveSHA accepts a full sha256 or a prefix of one stored artifact.
func (c *gwClient) resolveSHA(ctx context.Context, s string) (string, error) {
	s = strings.ToLower(s)
	if len(s) == 64 {
		return s, nil
	}
	var arts []fwArtifact
	if _, err := c.call(ctx, "GET", "/v1/artifacts", nil, &arts); err != nil {
		return "", err
	}
	var found []string
	for _, a := range arts {
		if s != "" && strings.HasPrefix(a.SHA256, s) {
			found = append(found, a.SHA256)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("no stored artifact starts with %q", s)
	}
	return "", fmt.Errorf("%q is ambiguous: %d artifacts start with it", s, len(found))
}

// gwRollout is a rollout as the API writes it.
type gwRollout struct {
	ID   string `json:"id"`
	Plan struct {
		Name     string `json:"name"`
		Artifact string `json:"artifact"`
		Window   *struct {
			TimeZone string `json:"time_zone"`
		} `json:"window"`
	} `json:"plan"`
	Image struct {
		SHA256 string `json:"sha256"`
		App    struct {
			Version string `json:"version"`
		} `json:"app"`
	} `json:"image"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Waves  []struct {
		Boards []string `json:"boards"`
	} `json:"waves"`
	Refused  []gwRefusal `json:"refused"`
	Wave     int         `json:"wave"`
	Finished bool        `json:"finished"`
	Created  *time.Time  `json:"created"`
	Updated  *time.Time  `json:"updated"`
	Progress struct {
		Boards  int            `json:"boards"`
		Phases  map[string]int `json:"phases"`
		Done    int            `json:"done"`
		Failed  int            `json:"failed"`
		Waiting int            `json:"waiting"`
		Percent float64        `json:"percent"`
	} `json:"progress"`
	WindowOpen bool       `json:"window_open"`
	NextWindow *time.Time `json:"next_window"`
}

// windowText says whether the rollout's window is open and when it next
// opens, in the window's time zone (the venue's) and in UTC; "" for a
// rollout without a window.
func (r gwRollout) windowText() string {
	switch {
	case r.Plan.Window == nil:
		return ""
	case r.WindowOpen:
		return "open"
	case r.NextWindow != nil && !r.NextWindow.IsZero():
		tz := r.Plan.Window.TimeZone
		loc, err := time.LoadLocation(tz)
		if tz == "" || err != nil {
			return "closed, next opens " + r.NextWindow.UTC().Format("2006-01-02 15:04 MST")
		}
		return "closed, next opens " + r.NextWindow.In(loc).Format("2006-01-02 15:04 MST") + " (" + tz + "; " +
			r.NextWindow.UTC().Format("15:04 MST") + ")"
	}
	return "closed, it never opens again"
}

type gwRefusal struct {
	Board  string `json:"board"`
	Reason string `json:"reason"`
}

func runRollout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, o, pos, err := parseFw("rollout", rolloutUsage, args, stderr)
	if err != nil {
		return err
	}
	cmd := pos[0]
	switch cmd {
	case "dry-run", "create":
		if err := nArgs(pos, 2, "rollout "+cmd+" PLAN.json"); err != nil {
			return err
		}
		plan, err := readPlan(pos[1])
		if err != nil {
			return err
		}
		if cmd == "dry-run" {
			return c.dryRun(ctx, plan, stdout)
		}
		var r gwRollout
		raw, err := c.call(ctx, "POST", "/v1/rollouts", plan, &r)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		fmt.Fprintf(stdout, "rollout %s created: %s to %d boards in %d waves (%d refused)\n",
			r.ID, r.Image.App.Version, r.Progress.Boards, len(r.Waves), len(r.Refused))
		return nil
	case "list":
		var rs []gwRollout
		raw, err := c.call(ctx, "GET", "/v1/rollouts", nil, &rs)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tVERSION\tSTATE\tWAVE\tDONE\tFAILED\tCREATED")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", r.ID, dash(r.Plan.Name), r.Image.App.Version, r.State,
				waveText(r), r.Progress.Done, r.Progress.Boards, r.Progress.Failed, when(r.Created))
		}
		return tw.Flush()
	case "get":
		if err := nArgs(pos, 2, "rollout get ID"); err != nil {
			return err
		}
		return c.rolloutCall(ctx, "GET", "/v1/rollouts/"+url.PathEscape(pos[1]), nil, stdout)
	case "boards":
		if err := nArgs(pos, 2, "rollout boards ID"); err != nil {
			return err
		}
		return c.rolloutBoards(ctx, pos[1], stdout)
	case "pause", "resume", "abort", "revert":
		if err := nArgs(pos, 2, "rollout "+cmd+" ID"); err != nil {
			return err
		}
		body := map[string]string{}
		if o.reason != "" && cmd != "resume" {
			body["reason"] = o.reason
		}
		return c.rolloutCall(ctx, "POST", "/v1/rollouts/"+url.PathEscape(pos[1])+"/"+cmd, body, stdout)
	case "watch":
		if err := nArgs(pos, 2, "rollout watch ID [--after N] [--follow]"); err != nil {
			return err
		}
		return c.watchRollout(ctx, pos[1], o, stdout)
	}
	return fmt.Errorf("%w: unknown rollout command %q", errUsage, cmd)
}

// readPlan reads a plan file ("-": stdin) and checks it is JSON.
func readPlan(path string) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: %s is not valid JSON", errUsage, path)
	}
	return json.RawMessage(b), nil
}

func (c *gwClient) dryRun(ctx context.Context, plan json.RawMessage, stdout io.Writer) error {
	var sel struct {
		Waves []struct {
			Boards []string `json:"boards"`
		} `json:"waves"`
		Refused []gwRefusal `json:"refused"`
		Waiting []gwRefusal `json:"waiting"`
		Skipped []gwRefusal `json:"skipped"`
		Boards  int         `json:"boards"`
	}
	raw, err := c.call(ctx, "POST", "/v1/rollouts/dry-run", plan, &sel)
	if err != nil || c.output == "json" {
		return jsonOr(stdout, raw, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tBOARDS\t")
	for i, w := range sel.Waves {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", i+1, len(w.Boards), strings.Join(w.Boards, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, list := range []struct {
		head string
		rs   []gwRefusal
	}{{"REFUSED", sel.Refused}, {"WOULD WAIT", sel.Waiting}, {"WOULD SKIP", sel.Skipped}} {
		if len(list.rs) == 0 {
			continue
		}
		// A table of its own: long reasons do not widen the waves'.
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "\n%s\tREASON\n", list.head)
		for _, r := range list.rs {
			fmt.Fprintf(tw, "%s\t%s\n", r.Board, r.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "%d boards in %d waves, %d refused, %d would wait, %d would be skipped\n",
		sel.Boards, len(sel.Waves), len(sel.Refused), len(sel.Waiting), len(sel.Skipped))
	return err
}

func (c *gwClient) rolloutCall(ctx context.Context, method, path string, body any, stdout io.Writer) error {
	var r gwRollout
	raw, err := c.call(ctx, method, path, body, &r)
	if err != nil || c.output == "json" {
		return jsonOr(stdout, raw, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", r.ID)
	row("name", dash(r.Plan.Name))
	row("image", r.Image.App.Version+" "+r.Image.SHA256)
	row("state", r.State)
	if r.Reason != "" {
		row("reason", r.Reason)
	}
	row("wave", waveText(r))
	row("progress", fmt.Sprintf("%d/%d done (%.0f%%), %d failed, %d waiting", r.Progress.Done, r.Progress.Boards, r.Progress.Percent, r.Progress.Failed, r.Progress.Waiting))
	if w := r.windowText(); w != "" {
		row("window", w)
	}
	phases := make([]string, 0, len(r.Progress.Phases))
	for p, n := range r.Progress.Phases {
		phases = append(phases, fmt.Sprintf("%s=%d", p, n))
	}
	sort.Strings(phases)
	row("phases", strings.Join(phases, " "))
	if len(r.Refused) > 0 {
		row("refused", strconv.Itoa(len(r.Refused)))
	}
	row("created", when(r.Created))
	row("updated", when(r.Updated))
	return tw.Flush()
}

func (c *gwClient) rolloutBoards(ctx context.Context, id string, stdout io.Writer) error {
	var bs []struct {
		Board       string `json:"board"`
		Wave        int    `json:"wave"`
		Phase       string `json:"phase"`
		Attempts    int    `json:"attempts"`
		FromVersion string `json:"from_version"`
		Error       string `json:"error"`
		Transfer    string `json:"transfer"`
		Sent        string `json:"sent"`
		Waiting     string `json:"waiting"`
		Timeline    []struct {
			Time  *time.Time `json:"time"`
			Phase string     `json:"phase"`
			Note  string     `json:"note"`
		} `json:"timeline"`
	}
	raw, err := c.call(ctx, "GET", "/v1/rollouts/"+url.PathEscape(id)+"/boards", nil, &bs)
	if err != nil || c.output == "json" {
		return jsonOr(stdout, raw, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOARD\tWAVE\tPHASE\tTRIES\tFROM\tSENT\tLAST STEP\tERROR")
	for _, b := range bs {
		last := "-"
		if n := len(b.Timeline); n > 0 {
			s := b.Timeline[n-1]
			last = strings.TrimSpace(when(s.Time) + " " + s.Note)
		}
		if b.Waiting != "" && b.Phase == "pending" {
			last = "waiting: " + b.Waiting
		}
		sent := "-"
		if b.Transfer != "" {
			sent = b.Transfer + " " + b.Sent + " B"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", b.Board, b.Wave+1, b.Phase, b.Attempts, dash(b.FromVersion), sent, last, dash(b.Error))
	}
	return tw.Flush()
}

func (c *gwClient) watchRollout(ctx context.Context, id string, o *fwOpts, stdout io.Writer) error {
	q := url.Values{}
	if o.after > 0 {
		q.Set("after", strconv.FormatUint(o.after, 10))
	}
	if !o.follow {
		q.Set("until_finished", "true")
	}
	if c.output != "json" {
		// The window first: a rollout outside it shows no events for
		// hours, and the operator should see why.
		var r gwRollout
		if _, err := c.call(ctx, "GET", "/v1/rollouts/"+url.PathEscape(id), nil, &r); err == nil {
			if w := r.windowText(); w != "" {
				fmt.Fprintf(stdout, "window %s\n", w)
			}
			if r.Progress.Waiting > 0 {
				fmt.Fprintf(stdout, "%d boards wait (a show, a health condition): holoctl rollout boards %s\n", r.Progress.Waiting, id)
			}
		}
	}
	resp, err := c.do(ctx, "GET", "/v1/rollouts/"+url.PathEscape(id)+"/events?"+q.Encode(), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Result *struct {
				N     string     `json:"n"`
				Time  *time.Time `json:"time"`
				Board string     `json:"board"`
				State string     `json:"state"`
				Phase string     `json:"phase"`
				Wave  int        `json:"wave"`
				Note  string     `json:"note"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("gateway: bad event line: %w", err)
		}
		if line.Error != nil {
			return fmt.Errorf("gateway: event stream ended: %s", line.Error.Message)
		}
		e := line.Result
		if e == nil {
			continue
		}
		if c.output == "json" {
			b, _ := json.Marshal(e)
			fmt.Fprintln(stdout, string(b))
			continue
		}
		who, what := "rollout", e.State
		if e.Board != "" {
			who, what = e.Board, e.Phase
		}
		fmt.Fprintf(stdout, "%-6s %-20s wave %-3d %-14s %-12s %s\n", e.N, when(e.Time), e.Wave+1, who, what, e.Note)
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// jsonOr writes raw indented when err is nil (the -o json output).
func jsonOr(w io.Writer, raw []byte, err error) error {
	if err != nil {
		return err
	}
	return writeJSON(w, raw)
}

func waveText(r gwRollout) string {
	if r.Wave >= len(r.Waves) {
		return fmt.Sprintf("%d/%d", len(r.Waves), len(r.Waves))
	}
	return fmt.Sprintf("%d/%d", r.Wave+1, len(r.Waves))
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
