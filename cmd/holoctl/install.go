package main

// holoctl install: the installation as code over the gateway's REST API
// (/v1/installation). The description is parsed here first (its errors
// with file:line:column, without a gateway), its content files are added
// to the gateway's content store by SHA-256, and the description goes up
// with its content named by SHA-256.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/holofleet/holofleet/gateway/installation"
)

const installUsage = `holoctl install COMMAND [flags]
  plan -f FILE               per board, what an apply would change (files, scenes, settings),
                             then the gateway's DMX patch and cue lists; diff is the same
  apply -f FILE [-m MSG]     store FILE as the next revision and apply it (admin); shows the
                             plan first, then the progress until the run ends (--no-wait: return)
  status                     every assigned board: in sync, drifted (how), applying,
                             unreachable, failed (why), needs the LAN; the DMX patch and
                             cue lists the revision holds: in sync or drifted (how)
  history                    the revisions, newest first
  rollback REV [-m MSG]      apply revision REV again as a new revision (admin)
  run ID                     one run and its boards
  pause ID | abort ID        stop starting boards / stop for good (operator)
  resume ID                  continue a paused run (admin)
  export -f FILE [--dir D] [--from-boards]
                             write the current revision as FILE and its content into D
                             (default: FILE's folder, content/); apply FILE restores it.
                             --from-boards: read the live boards instead (every file,
                             scene, setting, servo calibration; admin)
FILE is YAML or JSON (docs/installation.md); "-" reads stdin for diff and apply.
flags:`

type installOpts struct {
	file, message, dir string
	noWait, fromBoards bool
}

func runInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	o := &installOpts{}
	fs.StringVar(&o.file, "f", "", "the description file")
	fs.StringVar(&o.message, "m", "", "a message kept with the revision")
	fs.StringVar(&o.dir, "dir", "", "export: the folder for the content files")
	fs.BoolVar(&o.noWait, "no-wait", false, "apply, rollback: return once the run started")
	fs.BoolVar(&o.fromBoards, "from-boards", false, "export: read the live boards, not the current revision")
	fs.Usage = func() {
		fmt.Fprintln(stderr, installUsage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return usageErr(err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if c.output != "table" && c.output != "json" {
		return fmt.Errorf("%w: -o table or -o json", errUsage)
	}
	if len(pos) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: an install command is needed", errUsage)
	}
	needFile := func() error {
		if o.file == "" {
			return fmt.Errorf("%w: %s needs -f FILE", errUsage, pos[0])
		}
		return nil
	}
	switch pos[0] {
	case "plan", "diff", "apply":
		if err := nArgs(pos, 1, "install "+pos[0]+" -f FILE"); err != nil {
			return err
		}
		if err := needFile(); err != nil {
			return err
		}
		body, err := c.prepareDescription(ctx, o.file, pos[0] == "apply")
		if err != nil {
			return err
		}
		if pos[0] != "apply" {
			return c.installDiff(ctx, body, stdout)
		}
		return c.installApply(ctx, body, o, stdout)
	case "status":
		raw, err := c.call(ctx, http.MethodGet, "/v1/installation/status", nil, nil)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		var st installation.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("gateway: bad reply: %w", err)
		}
		fmt.Fprintf(stdout, "revision %d by %s at %s: %s\n", st.Revision.N, st.Revision.Who, st.Revision.When.Format(time.RFC3339), dash(st.Revision.Message))
		if st.Run != nil {
			fmt.Fprintf(stdout, "run %d is %s: %d of %d boards done\n", st.Run.ID, st.Run.State, st.Run.Done, st.Run.Boards)
		}
		if err := printPlans(stdout, st.Boards, true); err != nil {
			return err
		}
		return printSections(stdout, st.Sections)
	case "history":
		raw, err := c.call(ctx, http.MethodGet, "/v1/installation/history", nil, nil)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		var h struct {
			Revisions []installation.Revision `json:"revisions"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return fmt.Errorf("gateway: bad reply: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REV\tWHEN\tWHO\tRUN\tMESSAGE")
		for _, r := range h.Revisions {
			msg := r.Message
			if r.RollbackOf != 0 && msg == "" {
				msg = fmt.Sprintf("rollback to %d", r.RollbackOf)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", r.N, r.When.Format(time.RFC3339), r.Who, r.Run, dash(msg))
		}
		return tw.Flush()
	case "rollback":
		if err := nArgs(pos, 2, "install rollback REV"); err != nil {
			return err
		}
		n, err := strconv.Atoi(pos[1])
		if err != nil || n < 1 {
			return fmt.Errorf("%w: REV is a revision number", errUsage)
		}
		raw, err := c.call(ctx, http.MethodPost, "/v1/installation/rollback", map[string]any{"revision": n, "message": o.message}, nil)
		if err != nil {
			return err
		}
		return c.followRun(ctx, raw, o, stdout)
	case "run":
		if err := nArgs(pos, 2, "install run ID"); err != nil {
			return err
		}
		raw, err := c.call(ctx, http.MethodGet, "/v1/installation/runs/"+url.PathEscape(pos[1]), nil, nil)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		return printRun(stdout, raw)
	case "pause", "resume", "abort":
		if err := nArgs(pos, 2, "install "+pos[0]+" ID"); err != nil {
			return err
		}
		raw, err := c.call(ctx, http.MethodPost, "/v1/installation/runs/"+url.PathEscape(pos[1])+"/"+pos[0], map[string]any{}, nil)
		return jsonOr(stdout, raw, err)
	case "export":
		if err := nArgs(pos, 1, "install export -f FILE"); err != nil {
			return err
		}
		if err := needFile(); err != nil {
			return err
		}
		return c.installExport(ctx, o, stdout)
	}
	fs.Usage()
	return fmt.Errorf("%w: unknown install command %q", errUsage, pos[0])
}

// prepareDescription parses FILE here (errors with file:line:column),
// adds its content files to the gateway (upload: those it lacks) and
// returns the description as JSON with content named by SHA-256.
func (c *gwClient) prepareDescription(ctx context.Context, file string, upload bool) ([]byte, error) {
	var data []byte
	var err error
	name, base := file, filepath.Dir(file)
	if file == "-" {
		name, base = "stdin", "."
		data, err = io.ReadAll(io.LimitReader(os.Stdin, installation.MaxDescription+1))
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	d, err := installation.Parse(name, data)
	if err != nil {
		return nil, err
	}
	for _, cname := range slices.Sorted(func(yield func(string) bool) {
		for k := range d.Content {
			if !yield(k) {
				return
			}
		}
	}) {
		ct := d.Content[cname]
		if ct.File == "" {
			continue // already in the gateway's store
		}
		fn := ct.File
		if !filepath.IsAbs(fn) {
			fn = filepath.Join(base, fn)
		}
		sha, size, err := c.addContent(ctx, fn, ct.SHA256, upload)
		if err != nil {
			return nil, fmt.Errorf("content %s (%s): %w", cname, fn, err)
		}
		d.Content[cname] = installation.Content{SHA256: sha, Size: size}
	}
	return d.JSON(), nil
}

// addContent hashes a local file and, unless the gateway keeps it already
// (HEAD /v1/installation/content/SHA), uploads it. A diff does not
// upload: content the gateway lacks makes its plan fail with the name.
func (c *gwClient) addContent(ctx context.Context, fn, want string, upload bool) (string, int64, error) {
	f, err := os.Open(fn)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	sha, err := sha256File(f)
	if err != nil {
		return "", 0, err
	}
	if want != "" && want != sha {
		return "", 0, fmt.Errorf("the file hashes to %s, not the sha256 %s the description gives", sha, want)
	}
	if resp, err := c.do(ctx, http.MethodHead, "/v1/installation/content/"+sha, nil, ""); err == nil {
		resp.Body.Close()
		return sha, st.Size(), nil
	}
	if !upload {
		return sha, st.Size(), nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.base, "/")+"/v1/installation/content?sha256="+sha, f)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", errUsage, err)
	}
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("User-Agent", userAgent())
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode >= 400 {
		e := &gwError{Status: resp.StatusCode}
		if json.Unmarshal(raw, e) != nil || e.Code == "" {
			e.Code, e.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(raw))
		}
		return "", 0, e
	}
	return sha, st.Size(), nil
}

func (c *gwClient) installDiff(ctx context.Context, body []byte, stdout io.Writer) error {
	raw, err := c.call(ctx, http.MethodPost, "/v1/installation/plan", json.RawMessage(body), nil)
	if err != nil || c.output == "json" {
		return jsonOr(stdout, raw, err)
	}
	var p struct {
		Boards   []installation.BoardPlan   `json:"boards"`
		Sections []installation.SectionPlan `json:"sections"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("gateway: bad reply: %w", err)
	}
	if err := printPlans(stdout, p.Boards, true); err != nil {
		return err
	}
	return printSections(stdout, p.Sections)
}

// printSections writes the gateway sections (the DMX patch, the cue
// lists) after the boards: one line each, then what changes in each,
// marked as the boards' changes are (+ added, ~ changed, - removed).
func printSections(w io.Writer, sections []installation.SectionPlan) error {
	if len(sections) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tSTATE\tSUMMARY")
	for _, sp := range sections {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", sp.Section, sp.State, sp.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, sp := range sections {
		if len(sp.Changes) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", sp.Section)
		for _, c := range sp.Changes {
			mark := map[string]string{installation.OpAdd: "+", installation.OpChange: "~", installation.OpRemove: "-"}[c.Op]
			if c.Why != "" {
				fmt.Fprintf(w, "  %s %s (%s)\n", mark, c.Item, c.Why)
			} else {
				fmt.Fprintf(w, "  %s %s\n", mark, c.Item)
			}
		}
	}
	return nil
}

// printPlans writes one line per board, then (with details) what changes
// on each, kubectl diff style: + added, ~ replaced, - removed.
func printPlans(w io.Writer, plans []installation.BoardPlan, details bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// In a cluster each board names its gateway.
	cluster := slices.ContainsFunc(plans, func(bp installation.BoardPlan) bool { return bp.Gateway != "" })
	if cluster {
		fmt.Fprintln(tw, "BOARD\tGATEWAY\tPROFILE\tSTATE\tSUMMARY")
	} else {
		fmt.Fprintln(tw, "BOARD\tPROFILE\tSTATE\tSUMMARY")
	}
	for _, bp := range plans {
		if cluster {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", bp.Board, dash(bp.Gateway), dash(bp.Profile), bp.State, bp.Summary)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", bp.Board, dash(bp.Profile), bp.State, bp.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !details {
		return nil
	}
	for _, bp := range plans {
		if bp.Diff == nil || bp.Diff.Empty() {
			continue
		}
		fmt.Fprintf(w, "\nboard %s (%s):\n", bp.Board, bp.Profile)
		for _, f := range bp.Diff.Files {
			mark := map[string]string{installation.OpAdd: "+", installation.OpReplace: "~", installation.OpRemove: "-"}[f.Op]
			fmt.Fprintf(w, "  %s file %s (%s)\n", mark, f.Path, f.Why)
		}
		for _, s := range bp.Diff.Scenes {
			mark := "~"
			if s.Op == installation.OpRemove {
				mark = "-"
			} else if s.Why == "absent" {
				mark = "+"
			}
			fmt.Fprintf(w, "  %s scene %s (%s)\n", mark, s.Name, s.Why)
		}
		for _, s := range bp.Diff.Settings {
			fmt.Fprintf(w, "  ~ %s: %s -> %s\n", s.Field, s.From, s.To)
		}
	}
	return nil
}

func (c *gwClient) installApply(ctx context.Context, body []byte, o *installOpts, stdout io.Writer) error {
	if c.output != "json" {
		if err := c.installDiff(ctx, body, stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	raw, err := c.call(ctx, http.MethodPost, "/v1/installation/apply?message="+url.QueryEscape(o.message), json.RawMessage(body), nil)
	if err != nil {
		return err
	}
	return c.followRun(ctx, raw, o, stdout)
}

// followRun shows the revision an apply or rollback made, then a
// progress bar until its run ends (unless --no-wait).
func (c *gwClient) followRun(ctx context.Context, raw []byte, o *installOpts, stdout io.Writer) error {
	var ap struct {
		Revision installation.Revision  `json:"revision"`
		Run      installation.RunStatus `json:"run"`
	}
	if err := json.Unmarshal(raw, &ap); err != nil {
		return fmt.Errorf("gateway: bad reply: %w", err)
	}
	if c.output == "json" && o.noWait {
		return writeJSON(stdout, raw)
	}
	if c.output != "json" {
		fmt.Fprintf(stdout, "revision %d, run %d: %d boards\n", ap.Revision.N, ap.Run.ID, ap.Run.Boards)
	}
	if o.noWait {
		return nil
	}
	for {
		rraw, err := c.call(ctx, http.MethodGet, "/v1/installation/runs/"+strconv.Itoa(ap.Run.ID), nil, nil)
		if err != nil {
			return err
		}
		var r struct {
			Run installation.RunStatus `json:"run"`
		}
		if err := json.Unmarshal(rraw, &r); err != nil {
			return fmt.Errorf("gateway: bad reply: %w", err)
		}
		if c.output != "json" {
			fmt.Fprintf(stdout, "\r%s", progressBar(r.Run))
		}
		if r.Run.Finished || r.Run.State == installation.RunPaused {
			if c.output == "json" {
				return writeJSON(stdout, rraw)
			}
			fmt.Fprintln(stdout)
			if err := printRun(stdout, rraw); err != nil {
				return err
			}
			if r.Run.State != installation.RunDone || r.Run.Phases[installation.PhaseFailed] > 0 {
				return fmt.Errorf("run %d is %s: %s", r.Run.ID, r.Run.State, r.Run.Reason)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// progressBar is "[#####.....] 5/10 boards  in_sync 4  failed 1".
func progressBar(r installation.RunStatus) string {
	const width = 30
	done := 0
	if r.Boards > 0 {
		done = r.Done * width / r.Boards
	}
	var phases []string
	for _, p := range []string{installation.PhaseApplying, installation.PhaseInSync, installation.PhaseFailed,
		installation.PhaseUnreachable, installation.PhaseNeedsLAN, installation.PhaseCancelled} {
		if n := r.Phases[p]; n > 0 {
			phases = append(phases, fmt.Sprintf("%s %d", p, n))
		}
	}
	return fmt.Sprintf("[%s%s] %d/%d boards  %s  %s", strings.Repeat("#", done), strings.Repeat(".", width-done),
		r.Done, r.Boards, strings.Join(phases, "  "), r.State)
}

func printRun(w io.Writer, raw []byte) error {
	var r struct {
		Run    installation.RunStatus  `json:"run"`
		Boards []installation.RunBoard `json:"boards"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("gateway: bad reply: %w", err)
	}
	fmt.Fprintf(w, "run %d (revision %d by %s) is %s: %s\n", r.Run.ID, r.Run.Revision, r.Run.Who, r.Run.State, dash(r.Run.Reason))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOARD\tWAVE\tPHASE\tREQUESTS\tWHAT")
	for _, b := range r.Boards {
		what := b.Summary
		if b.Error != "" {
			what = b.Error
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", b.Board, b.Wave+1, b.Phase, b.Requests, dash(what))
	}
	return tw.Flush()
}

// installExport writes the current revision as a description whose
// content files are downloaded into the export folder.
func (c *gwClient) installExport(ctx context.Context, o *installOpts, stdout io.Writer) error {
	var d *installation.Description
	var header string
	if o.fromBoards {
		var ex struct {
			Description json.RawMessage `json:"description"`
			Warnings    []string        `json:"warnings"`
		}
		if _, err := c.call(ctx, http.MethodPost, "/v1/installation/export", map[string]any{}, &ex); err != nil {
			return err
		}
		for _, w := range ex.Warnings {
			fmt.Fprintln(stdout, "warning:", w)
		}
		var err error
		if d, err = installation.Parse("export", ex.Description); err != nil {
			return err
		}
		header = fmt.Sprintf("# Exported from the live boards at %s.\n", time.Now().UTC().Format(time.RFC3339))
	} else {
		var cur struct {
			Revision installation.Revision `json:"revision"`
		}
		if _, err := c.call(ctx, http.MethodGet, "/v1/installation", nil, &cur); err != nil {
			return err
		}
		var rev installation.Revision
		if _, err := c.call(ctx, http.MethodGet, "/v1/installation/revisions/"+strconv.Itoa(cur.Revision.N), nil, &rev); err != nil {
			return err
		}
		var err error
		if d, err = installation.Parse(fmt.Sprintf("revision %d", rev.N), rev.Description); err != nil {
			return err
		}
		header = fmt.Sprintf("# Exported from revision %d (%s, %s).\n", rev.N, rev.Who, rev.When.Format(time.RFC3339))
	}
	dir := o.dir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(o.file), "content")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(o.file), dir)
	if err != nil {
		rel = dir
	}
	for name, ct := range d.Content {
		fn := filepath.Join(dir, name+extOf(d, name))
		if err := c.download(ctx, ct.SHA256, fn); err != nil {
			return fmt.Errorf("content %s: %w", name, err)
		}
		d.Content[name] = installation.Content{File: filepath.ToSlash(filepath.Join(rel, filepath.Base(fn))), SHA256: ct.SHA256}
	}
	out, err := descriptionYAML(d)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.file, append([]byte(header), out...), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "written to %s, %d content files in %s\n", o.file, len(d.Content), dir)
	return nil
}

// extOf is the extension of the first board path that uses content name
// (".mov"), so exported files keep a type people recognise.
func extOf(d *installation.Description, name string) string {
	for _, p := range d.Profiles {
		for bp, cn := range p.Files {
			if cn == name {
				return path.Ext(bp)
			}
		}
	}
	return ""
}

func (c *gwClient) download(ctx context.Context, sha, fn string) error {
	resp, err := c.do(ctx, http.MethodGet, "/v1/installation/content/"+sha, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp := fn + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		f2, err2 := os.Open(tmp)
		if err2 != nil {
			return err2
		}
		got, err2 := sha256File(f2)
		f2.Close()
		if err2 != nil {
			return err2
		}
		if got != sha {
			err = fmt.Errorf("downloaded bytes hash to %s, not %s", got, sha)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, fn)
}

// descriptionYAML writes d as block-style YAML in the description's key
// order (its canonical JSON read as YAML, styles cleared).
func descriptionYAML(d *installation.Description) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(d.JSON(), &n); err != nil {
		return nil, err
	}
	var clear func(*yaml.Node)
	clear = func(x *yaml.Node) {
		x.Style &^= yaml.FlowStyle
		if x.Kind == yaml.ScalarNode && x.Tag == "!!str" {
			x.Style &^= yaml.DoubleQuotedStyle
		}
		for _, c := range x.Content {
			clear(c)
		}
	}
	clear(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if _, err := installation.Parse("export", out); err != nil {
		return nil, errors.Join(errors.New("the exported YAML does not read back"), err)
	}
	return out, nil
}

// sha256File hashes r to its end (hex).
func sha256File(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
