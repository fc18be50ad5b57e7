package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// Duration is a time.Duration written in JSON as Go's text ("90s",
// "2m30s"); a number is taken as seconds.
type Duration time.Duration

// MarshalJSON writes d as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads text or seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%w: duration %q", ErrPlan, s)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || math.IsNaN(f) || math.Abs(f) > 1e9 {
		return fmt.Errorf("%w: duration %s", ErrPlan, b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Target selects the boards a rollout may update: the union of Boards,
// Groups members and boards carrying every label of Labels, narrowed to
// those running Firmware (as the fleet last saw it) and, with OnlineOnly,
// to boards online when the rollout is created. All empty selects
// nothing (a rollout never targets the whole fleet by omission): set All.
type Target struct {
	Boards     []string          `json:"boards,omitempty"`
	Groups     []int             `json:"groups,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	All        bool              `json:"all,omitempty"`
	Firmware   string            `json:"firmware,omitempty"`
	OnlineOnly bool              `json:"online_only,omitempty"`
}

// Wave sizes one wave after the canaries: Count boards, or Percent of
// the boards the canaries leave. The last wave takes every board left.
type Wave struct {
	Count   int     `json:"count,omitempty"`
	Percent float64 `json:"percent,omitempty"`
}

// Timeouts bound each phase of one board's update.
type Timeouts struct {
	// Transfer bounds the upload (or the pull) of the image.
	Transfer Duration `json:"transfer,omitempty"`
	// Restart bounds the time from activation until the board runs the
	// new image (or is found back on the old one).
	Restart Duration `json:"restart,omitempty"`
	// Confirm bounds the time the new image may stay on trial once it runs.
	Confirm Duration `json:"confirm,omitempty"`
}

// Failure actions.
const (
	ActionPause  = "pause"
	ActionRevert = "revert" // abort and revert the boards already updated
)

// Methods of getting the image to a board.
const (
	MethodPush = "push" // PUT /ota/image from the gateway
	MethodPull = "pull" // POST /ota/pull {url} of the gateway's image URL (https)
)

// Thresholds decide when a rollout advances or stops.
type Thresholds struct {
	// Success is the fraction of a wave (0-1] that must end updated (or
	// skipped as already there) before the next wave starts; default 1.
	Success float64 `json:"success,omitempty"`
	// WaveFailure and TotalFailure are fractions (0-1] of failed boards
	// (rolled back, timed out, failed) in one wave and in the whole
	// rollout that trigger Action, once MinSample boards have finished
	// (in that wave, resp. overall). 0 means the default 1: only when
	// every board fails.
	WaveFailure  float64 `json:"wave_failure,omitempty"`
	TotalFailure float64 `json:"total_failure,omitempty"`
	// MinSample is how many finished boards the failure ratios need
	// (default 1).
	MinSample int `json:"min_sample,omitempty"`
	// Action is pause (default) or revert.
	Action string `json:"action,omitempty"`
}

// Window is when a rollout may update boards: a daily window ("HH:MM"
// to "HH:MM", may span midnight) on some days of the week, in a time
// zone, and/or explicit intervals; the window is open when either is.
//
// Without Strict, images are staged at once and only activations wait for
// the window (a restart is what an open venue must not see). With Strict,
// no board starts outside the window at all (no image leaves either:
// the venue's network is busy too); boards already started finish.
type Window struct {
	Start string `json:"start,omitempty" yaml:"start"`
	End   string `json:"end,omitempty" yaml:"end"`
	// Days are the weekdays on which the daily window opens (mon, tue,
	// wed, thu, fri, sat, sun); empty means every day. A window spanning
	// midnight belongs to the day it opens.
	Days []string `json:"days,omitempty" yaml:"days"`
	// TimeZone is the IANA zone of Start, End and Days (the
	// installation's); empty means UTC.
	TimeZone string `json:"time_zone,omitempty" yaml:"time_zone"`
	// Intervals are explicit openings, [from, to).
	Intervals []Interval `json:"intervals,omitempty" yaml:"intervals"`
	// Strict: outside the window no board starts; boards started finish.
	Strict bool `json:"strict,omitempty" yaml:"strict"`
}

// Interval is one explicit opening of a window, from inclusive, to
// exclusive.
type Interval struct {
	From time.Time `json:"from" yaml:"from"`
	To   time.Time `json:"to" yaml:"to"`
}

// MaxIntervals bounds a window's explicit intervals.
const MaxIntervals = 100

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// Plan is what an operator asks for.
type Plan struct {
	Name string `json:"name,omitempty"`
	// Artifact is the image's SHA-256 in the gateway's store.
	Artifact string `json:"artifact"`
	Target   Target `json:"target"`
	// Canaries form the first wave, in this order; each must be a target.
	Canaries []string `json:"canaries,omitempty"`
	// Waves size the waves after the canaries; empty means one wave.
	Waves []Wave `json:"waves,omitempty"`
	// Growth, above 1, repeats the last wave's size times Growth until
	// every board is in a wave (1, 2, 4, ...); 0 puts the rest in one wave.
	Growth float64 `json:"growth,omitempty"`
	// MaxInFlight bounds the boards being sent the image, checked and
	// activated at once (default 10): the gateway's bandwidth and the
	// boards' update sessions. A board asked to restart leaves the count
	// while it restarts and confirms; MaxRestarting bounds those.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// MaxRestarting bounds the boards between activation and their end
	// (confirmed new image, rollback, timeout) at once; 0 leaves them
	// bounded by the wave only. With a cap, an image is staged first and
	// activated on its own request once a restart slot is free; without
	// one, the upload carries the activation.
	MaxRestarting int      `json:"max_restarting,omitempty"`
	Timeouts      Timeouts `json:"timeouts,omitzero"`
	// Soak is how long a finished wave is watched before the next starts.
	Soak       Duration   `json:"soak,omitempty"`
	Thresholds Thresholds `json:"thresholds,omitzero"`
	// Retries is how often a transient failure (unreachable, busy) of
	// one board is tried again, waiting Backoff, 2*Backoff, ... up to
	// MaxBackoff (or Backoff when that is longer) between two tries.
	Retries int      `json:"retries,omitempty"`
	Backoff Duration `json:"backoff,omitempty"`
	// Bandwidth caps the rollout's image bytes per second (0: none).
	Bandwidth int64   `json:"bandwidth,omitempty"`
	Window    *Window `json:"window,omitempty"`
	// Health are conditions a board must meet before it starts (gate.go).
	Health *Health `json:"health,omitempty"`
	// IgnoreShow starts boards even while they are busy with a show (a
	// scene running to its end, show=live, a ShowGuard): for an
	// emergency fix only.
	IgnoreShow bool `json:"ignore_show,omitempty"`
	// Method is push (default) or pull.
	Method string `json:"method,omitempty"`
	// FullImages sends every board the whole image, never a delta.
	FullImages bool `json:"full_images,omitempty"`
}

// Defaults and limits of plans.
const (
	DefaultMaxInFlight = 10
	MaxMaxInFlight     = 1000
	DefaultTransfer    = 5 * time.Minute
	DefaultRestart     = 2 * time.Minute
	DefaultConfirm     = time.Minute
	DefaultBackoff     = 5 * time.Second
	MaxRetries         = 20
	MaxWaves           = 100
	MaxTimeout         = 24 * time.Hour
	// MaxBackoff is the longest wait between two tries of a board (or
	// the plan's Backoff when longer). Unbounded, the twelfth failure of
	// a board whose line was busy for a while (a show's timed sends,
	// gateways restarting) put its next try over half an hour away, long
	// after the line was free again: the soak's rollout left two line
	// boards pending for 15 minutes so.
	MaxBackoff = time.Minute
)

// normalise fills defaults and checks everything that does not need the
// fleet or the artifact store.
func (p *Plan) normalise() error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if p.Artifact == "" {
		bad("no artifact")
	}
	t := p.Target
	if len(t.Boards) == 0 && len(t.Groups) == 0 && len(t.Labels) == 0 && !t.All {
		bad("empty target: name boards, groups, labels or all")
	}
	for _, g := range t.Groups {
		if g < 1 || g > 31 {
			bad("target group %d outside 1-31", g)
		}
	}
	if len(p.Waves) > MaxWaves {
		bad("%d waves (at most %d)", len(p.Waves), MaxWaves)
	}
	for i, w := range p.Waves {
		switch {
		case w.Count < 0 || w.Percent < 0 || math.IsNaN(w.Percent) || w.Percent > 100:
			bad("wave %d: count and percent must be 0-n and 0-100", i+1)
		case (w.Count > 0) == (w.Percent > 0):
			bad("wave %d: give count or percent, one of them", i+1)
		}
	}
	if p.Growth != 0 && (p.Growth < 1 || p.Growth > 100 || math.IsNaN(p.Growth)) {
		bad("growth %v outside 1-100", p.Growth)
	}
	if p.MaxInFlight == 0 {
		p.MaxInFlight = DefaultMaxInFlight
	}
	if p.MaxInFlight < 0 || p.MaxInFlight > MaxMaxInFlight {
		bad("max_in_flight %d outside 1-%d", p.MaxInFlight, MaxMaxInFlight)
	}
	if p.MaxRestarting < 0 || p.MaxRestarting > MaxMaxInFlight {
		bad("max_restarting %d outside 0-%d", p.MaxRestarting, MaxMaxInFlight)
	}
	for _, d := range []struct {
		name string
		v    *Duration
		def  time.Duration
	}{{"transfer", &p.Timeouts.Transfer, DefaultTransfer}, {"restart", &p.Timeouts.Restart, DefaultRestart},
		{"confirm", &p.Timeouts.Confirm, DefaultConfirm}, {"backoff", &p.Backoff, DefaultBackoff}} {
		if *d.v == 0 {
			*d.v = Duration(d.def)
		}
		if *d.v < 0 || d.v.D() > MaxTimeout {
			bad("%s %v outside 0-24h", d.name, d.v.D())
		}
	}
	if p.Soak < 0 || p.Soak.D() > 7*MaxTimeout {
		bad("soak %v outside 0-168h", p.Soak.D())
	}
	th := &p.Thresholds
	if th.Success == 0 {
		th.Success = 1
	}
	if th.WaveFailure == 0 {
		th.WaveFailure = 1
	}
	if th.TotalFailure == 0 {
		th.TotalFailure = 1
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"success", th.Success}, {"wave_failure", th.WaveFailure}, {"total_failure", th.TotalFailure}} {
		if !(f.v > 0 && f.v <= 1) {
			bad("threshold %s %v outside (0, 1]", f.name, f.v)
		}
	}
	if th.MinSample == 0 {
		th.MinSample = 1
	}
	if th.MinSample < 0 {
		bad("min_sample %d below 1", th.MinSample)
	}
	switch th.Action {
	case "":
		th.Action = ActionPause
	case ActionPause, ActionRevert:
	default:
		bad("threshold action %q (pause or revert)", th.Action)
	}
	if p.Retries < 0 || p.Retries > MaxRetries {
		bad("retries %d outside 0-%d", p.Retries, MaxRetries)
	}
	if p.Bandwidth < 0 {
		bad("bandwidth %d below 0", p.Bandwidth)
	} else if p.Bandwidth > 0 && p.Bandwidth < 1024 {
		bad("bandwidth %d B/s below 1024", p.Bandwidth)
	}
	if p.Window != nil {
		errs = append(errs, p.Window.check()...)
	}
	errs = append(errs, p.Health.check()...)
	switch p.Method {
	case "":
		p.Method = MethodPush
	case MethodPush, MethodPull:
	default:
		bad("method %q (push or pull)", p.Method)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrPlan, errors.Join(errs...))
	}
	return nil
}

func parseHM(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 || len(m) != 2 {
		return 0, fmt.Errorf("window time %q is not HH:MM", s)
	}
	return hh*60 + mm, nil
}

func (w *Window) minutes() (int, int, error) {
	a, err := parseHM(w.Start)
	if err != nil {
		return 0, 0, err
	}
	b, err := parseHM(w.End)
	if err != nil {
		return 0, 0, err
	}
	if a == b {
		return 0, 0, fmt.Errorf("window %s-%s is empty", w.Start, w.End)
	}
	return a, b, nil
}

// daily reports whether the window has a daily part.
func (w *Window) daily() bool { return w.Start != "" || w.End != "" }

// Check reports what is wrong with the window (every problem, joined);
// other packages that take a Window (installation applies) use it.
func (w *Window) Check() error { return errors.Join(w.check()...) }

// check lists what is wrong with the window.
func (w *Window) check() []error {
	var errs []error
	if !w.daily() && len(w.Intervals) == 0 {
		errs = append(errs, errors.New("window: give start and end, or intervals"))
	}
	if w.daily() {
		if _, _, err := w.minutes(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range w.Days {
		if _, ok := weekdays[strings.ToLower(d)]; !ok {
			errs = append(errs, fmt.Errorf("window day %q (mon, tue, wed, thu, fri, sat or sun)", d))
		}
	}
	if len(w.Days) > 0 && !w.daily() {
		errs = append(errs, errors.New("window days need start and end"))
	}
	if _, err := w.location(); err != nil {
		errs = append(errs, err)
	}
	if len(w.Intervals) > MaxIntervals {
		errs = append(errs, fmt.Errorf("window: %d intervals (at most %d)", len(w.Intervals), MaxIntervals))
	}
	for i, iv := range w.Intervals {
		if !iv.To.After(iv.From) {
			errs = append(errs, fmt.Errorf("window interval %d: to must be after from", i+1))
		}
	}
	return errs
}

func (w *Window) location() (*time.Location, error) {
	if w.TimeZone == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil || w.TimeZone == "Local" {
		return nil, fmt.Errorf("window time zone %q is not an IANA zone name", w.TimeZone)
	}
	return loc, nil
}

func (w *Window) onDay(d time.Weekday) bool {
	if len(w.Days) == 0 {
		return true
	}
	for _, s := range w.Days {
		if weekdays[strings.ToLower(s)] == d {
			return true
		}
	}
	return false
}

// Open reports whether t falls inside the window (nil: always).
func (w *Window) Open(t time.Time) bool {
	if w == nil {
		return true
	}
	for _, iv := range w.Intervals {
		if !t.Before(iv.From) && t.Before(iv.To) {
			return true
		}
	}
	if !w.daily() {
		return false
	}
	a, b, err := w.minutes()
	loc, lerr := w.location()
	if err != nil || lerr != nil {
		return false
	}
	lt := t.In(loc)
	m := lt.Hour()*60 + lt.Minute()
	switch {
	case a < b:
		return m >= a && m < b && w.onDay(lt.Weekday())
	case m >= a:
		return w.onDay(lt.Weekday())
	case m < b:
		// The hours after midnight belong to yesterday's window.
		return w.onDay(lt.AddDate(0, 0, -1).Weekday())
	}
	return false
}

// Next returns when the window is next open at or after t: t itself when
// it is open; zero when it never opens again (only past intervals).
func (w *Window) Next(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	var best time.Time
	take := func(c time.Time) {
		if c.After(t) && (best.IsZero() || c.Before(best)) {
			best = c
		}
	}
	for _, iv := range w.Intervals {
		take(iv.From)
	}
	if w.daily() {
		a, _, err := w.minutes()
		loc, lerr := w.location()
		if err == nil && lerr == nil {
			lt := t.In(loc)
			for d := 0; d <= 8; d++ {
				day := time.Date(lt.Year(), lt.Month(), lt.Day()+d, a/60, a%60, 0, 0, loc)
				if w.onDay(day.Weekday()) {
					take(day)
				}
			}
		}
	}
	return best
}

// Refusal is a board the selection names that will not be updated.
type Refusal struct {
	Board  string `json:"board"`
	Reason string `json:"reason"`
}

// Selection is who a plan updates and who it refuses, wave by wave.
type Selection struct {
	Waves   [][]string `json:"waves"`
	Refused []Refusal  `json:"refused"`
	// Unchecked are selected boards whose trusted keys could not be read
	// (GET /ota) when the plan was checked, with why; the image's
	// signature is checked against them again before it is sent.
	Unchecked []Refusal `json:"unchecked,omitempty"`
	// Waiting (dry run only) are selected boards that would not start now:
	// busy with a show, or failing a health condition the plan waits for;
	// Skipped those a health condition would skip.
	Waiting []Refusal `json:"waiting,omitempty"`
	Skipped []Refusal `json:"skipped,omitempty"`
	// bases are the images the selected boards run (those that show it),
	// the bases of the deltas the rollout will want.
	bases map[string]bool
}

// Boards counts the selected boards.
func (s Selection) Boards() int {
	n := 0
	for _, w := range s.Waves {
		n += len(w)
	}
	return n
}

// selectBoards resolves p's target against the fleet and forms the
// waves. busy tells which board is in another active rollout.
func selectBoards(p *Plan, views []fleet.BoardView, busy func(id string) string) (Selection, error) {
	sel, picked := pickBoards(p, views, busy)
	return sel, sel.formWaves(p, picked)
}

// pickBoards resolves p's target against the fleet: the boards it names
// and may update, sorted, and in sel.Refused those it names and may not.
// busy tells which board is in another active rollout.
func pickBoards(p *Plan, views []fleet.BoardView, busy func(id string) string) (sel Selection, picked []string) {
	t := p.Target
	known := map[string]fleet.BoardView{}
	for _, v := range views {
		known[v.ID] = v
	}
	seen := map[string]bool{}
	refuse := func(id, why string) {
		if !seen[id] {
			seen[id] = true
			sel.Refused = append(sel.Refused, Refusal{id, why})
		}
	}
	for _, id := range t.Boards {
		if _, ok := known[id]; !ok {
			refuse(id, "unknown board")
		}
	}
	for _, v := range views {
		named := t.All || slices.Contains(t.Boards, v.ID) || slices.ContainsFunc(t.Groups, func(g int) bool { return slices.Contains(v.Groups, g) })
		if !named && len(t.Labels) > 0 {
			named = true
			for k, want := range t.Labels {
				if v.Labels[k] != want {
					named = false
				}
			}
		}
		if !named || seen[v.ID] {
			continue
		}
		switch {
		case t.Firmware != "" && v.Firmware != t.Firmware:
			refuse(v.ID, fmt.Sprintf("runs firmware %q, the target asks for %q", v.Firmware, t.Firmware))
		case t.OnlineOnly && !v.Online:
			refuse(v.ID, "offline: "+v.OfflineReason)
		case v.URL == "" && v.Line != "":
			refuse(v.ID, lineOnly(v.Line))
		case busy(v.ID) != "":
			refuse(v.ID, "in active rollout "+busy(v.ID))
		default:
			seen[v.ID] = true
			picked = append(picked, v.ID)
		}
	}
	slices.Sort(picked)
	return sel, picked
}

// lineOnly is why a board reached only over an RS485 line is left out:
// the host link serves no firmware update (board-api.md, "Not served
// over the link"), so such a board can only fail its transfer, and a
// selection of several would trip the failure threshold of a rollout
// that could otherwise go on (docs/rollouts.md).
func lineOnly(line string) string {
	return "reached only over line " + line + ": firmware is not sent over the host link; give the board a LAN address"
}

// refusedWhy is why board id was refused, or "".
func (s Selection) refusedWhy(id string) string {
	for _, r := range s.Refused {
		if r.Board == id {
			return r.Reason
		}
	}
	return ""
}

// maxListed bounds the refusals an error names.
const maxListed = 10

// formWaves checks the canaries against picked (sorted) and sizes the
// waves into s.Waves.
func (s *Selection) formWaves(p *Plan, picked []string) error {
	for _, c := range p.Canaries {
		if !slices.Contains(picked, c) {
			if why := s.refusedWhy(c); why != "" {
				return fmt.Errorf("%w: canary %s is refused: %s", ErrPlan, c, why)
			}
			return fmt.Errorf("%w: canary %s is not among the selected boards", ErrPlan, c)
		}
	}
	if len(picked) == 0 {
		var why []string
		for i, r := range s.Refused {
			if i == maxListed {
				why = append(why, fmt.Sprintf("and %d more", len(s.Refused)-maxListed))
				break
			}
			why = append(why, r.Board+": "+r.Reason)
		}
		detail := ""
		if len(why) > 0 {
			detail = ": " + strings.Join(why, "; ")
		}
		return fmt.Errorf("%w: the target selects no board (%d refused%s)", ErrPlan, len(s.Refused), detail)
	}
	if len(p.Canaries) > 0 {
		s.Waves = append(s.Waves, slices.Clone(p.Canaries))
		picked = slices.DeleteFunc(slices.Clone(picked), func(id string) bool { return slices.Contains(p.Canaries, id) })
	}
	total := len(picked)
	last := 0
	for i := 0; len(picked) > 0; i++ {
		var n int
		switch {
		case i < len(p.Waves) && p.Waves[i].Count > 0:
			n = p.Waves[i].Count
		case i < len(p.Waves):
			n = int(math.Ceil(p.Waves[i].Percent * float64(total) / 100))
		case p.Growth >= 1 && last > 0:
			n = int(math.Ceil(float64(last) * p.Growth))
		default:
			n = len(picked)
		}
		n = max(1, min(n, len(picked)))
		if i == len(p.Waves)-1 && p.Growth < 1 {
			n = len(picked) // the last explicit wave takes the rest
		}
		s.Waves = append(s.Waves, slices.Clone(picked[:n]))
		picked = picked[n:]
		last = n
	}
	return nil
}

// retryWait is how long a board waits after its n-th transient failure
// (n >= 1): Backoff, doubled at each failure, at most MaxBackoff (or
// Backoff when that is longer).
func (p *Plan) retryWait(n int) time.Duration {
	d, ceiling := p.Backoff.D(), max(p.Backoff.D(), MaxBackoff)
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}
