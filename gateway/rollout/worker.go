package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// worker drives one board of one rollout through its steps until the
// board is terminal, must wait (retry backoff, maintenance window) or ctx
// ends. Every step reads the board's GET /ota first and acts on what it
// shows, so a step run twice (after a crash) does no harm.
type worker struct {
	e  *Engine
	r  *run
	id string
}

// errTransient marks failures worth another try (unreachable, busy).
var errTransient = errors.New("transient")

func (w *worker) board() *Board {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	return w.r.boards[w.id].clone()
}

func (w *worker) state() string {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	return w.r.r.State
}

// rollout returns the rollout's record as it is now (setState replaces it
// under the engine's lock).
func (w *worker) rollout() Rollout {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	return w.r.r
}

func (w *worker) now() time.Time { return w.e.o.Clock.Now() }

func (w *worker) sleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, w.e.o.Clock, d)
}

// call runs a JSON request on the board and decodes a 2xx reply into
// out. A board error is returned as is; transport failures and 409 busy
// are errTransient.
func (w *worker) call(ctx context.Context, method, path string, body, out any) error {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep, err := w.e.o.Fleet.Call(ctx, w.id, method, path, raw)
	return w.reply(rep, err, out)
}

func (w *worker) reply(rep fleet.Reply, err error, out any) error {
	if err != nil {
		return fmt.Errorf("%w: %w", errTransient, err)
	}
	if err := rep.Err(); err != nil {
		if rep.Status == http.StatusConflict || rep.Status >= 500 {
			return fmt.Errorf("%w: %v", errTransient, err)
		}
		return err
	}
	if out != nil {
		if err := json.Unmarshal(rep.Body, out); err != nil {
			return fmt.Errorf("%w: %v", fleet.ErrBadReply, err)
		}
	}
	return nil
}

// view is what GET /ota says, read for the rollout.
type view struct {
	st      boardapi.OTAStatus
	running *boardapi.OTASlot
	boots   *boardapi.OTASlot
}

func (w *worker) status(ctx context.Context) (view, error) {
	var v view
	if err := w.call(ctx, http.MethodGet, "/ota", nil, &v.st); err != nil {
		return v, err
	}
	for i := range v.st.Slots {
		s := &v.st.Slots[i]
		if s.Running {
			v.running = s
		}
		if s.Boots {
			v.boots = s
		}
	}
	if v.running == nil {
		return v, fmt.Errorf("%w: the board runs outside its slots", fleet.ErrBadReply)
	}
	return v, nil
}

// other is the label of the slot that is not running.
func (v view) other() string {
	for _, s := range v.st.Slots {
		if !s.Running {
			return s.Label
		}
	}
	return ""
}

func (v view) slot(label string) *boardapi.OTASlot {
	for i := range v.st.Slots {
		if v.st.Slots[i].Label == label {
			return &v.st.Slots[i]
		}
	}
	return nil
}

func state(s *boardapi.OTASlot) string {
	if s == nil || s.State == nil {
		return ""
	}
	return *s.State
}

// isTarget reports whether app is the rollout's image.
func (w *worker) isTarget(app *boardapi.App) bool {
	t := w.rollout().Image.App
	return app != nil && app.Version == t.Version && app.Project == t.Project && (t.ELFSHA256 == "" || app.ELFSHA256 == t.ELFSHA256)
}

// staged reports whether the board holds the rollout's image staged.
func (w *worker) staged(v view) bool {
	s := v.st.Session
	return s.State == boardapi.SessionStaged && s.SHA256 != nil && *s.SHA256 == w.rollout().Image.SHA256
}

// drive runs the board's steps.
func (w *worker) drive(ctx context.Context) error {
	for ctx.Err() == nil {
		b := w.board()
		st := w.state()
		if Terminal(b.Phase) && !(st == StateReverting && b.Phase == PhaseSucceeded) {
			return nil
		}
		wait, err := w.step(ctx, b, st)
		if errors.Is(err, errHold) {
			return nil // the scheduler asks again after Recheck
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, fleet.ErrLineBusy) {
				// Timed sends (a show) keep the board's line and it is on
				// no other way: nothing was sent, no retry is spent. A
				// pending board waits at the gate; one past it asks again.
				if b.Phase == PhasePending {
					if herr := w.hold(ctx, w.board(), WaitLineBusy); !errors.Is(herr, errHold) {
						return herr
					}
					return nil
				}
				wait, err = true, nil
			} else if errors.Is(err, errTransient) && b.Phase != PhaseRestarting && b.Phase != PhaseReverting {
				if !w.e.settling(err) {
					return w.retry(ctx, w.board(), err)
				}
				// The gateway has just started and its fleet has not
				// found the board again yet: no retry is spent on that.
				wait, err = true, nil
			}
		}
		if err != nil {
			if b.Phase == PhaseRestarting || b.Phase == PhaseReverting {
				if !w.now().Before(b.Deadline) {
					return w.end(ctx, b, PhaseTimedOut, err.Error())
				}
				wait = true
			} else {
				return w.end(ctx, b, PhaseFailed, err.Error())
			}
		}
		if wait {
			if err := w.sleep(ctx, w.pollIn()); err != nil {
				return nil
			}
		}
		if b2 := w.board(); b2.Phase == PhaseStaged && !w.rollout().Plan.Window.Open(w.now()) && st == StateRunning {
			return nil // the scheduler starts it again inside the window
		}
	}
	return nil
}

// pollIn is how long to wait before asking a restarting board again:
// Poll, or until the restart asked for can have happened.
func (w *worker) pollIn() time.Duration {
	b := w.board()
	if (b.Phase == PhaseRestarting || b.Phase == PhaseReverting) && !b.Kicked.IsZero() {
		if left := b.Kicked.Add(w.e.o.RestartDelay).Sub(w.now()); left > w.e.o.Poll {
			return left
		}
	}
	return w.e.o.Poll
}

// retry schedules another try after a transient failure, or ends the
// board once the retries are spent.
func (w *worker) retry(ctx context.Context, b *Board, cause error) error {
	p := w.rollout().Plan
	if b.Attempts >= p.Retries {
		phase := PhaseFailed
		if errors.Is(cause, fleet.ErrUnreachable) || errors.Is(cause, fleet.ErrNoReply) || strings.Contains(cause.Error(), "unreachable") {
			phase = PhaseUnreachable
		}
		if b.Phase == PhaseStaging || b.Phase == PhaseStaged {
			w.discard(ctx)
		}
		return w.end(ctx, b, phase, cause.Error())
	}
	b.Attempts++
	b.NextTry = w.now().Add(p.retryWait(b.Attempts)).UTC()
	b.Error = cause.Error()
	return w.e.save(ctx, w.r, b, fmt.Sprintf("attempt %d failed, next try at %s: %v", b.Attempts, b.NextTry.Format(time.TimeOnly), cause))
}

func (w *worker) end(ctx context.Context, b *Board, phase, note string) error {
	b.Phase = phase
	if failed(phase) || phase == PhaseUnreachable {
		b.Error = note
	}
	return w.e.save(ctx, w.r, b, note)
}

func (w *worker) to(ctx context.Context, b *Board, phase, note string) error {
	b.Phase, b.NextTry = phase, time.Time{}
	return w.e.save(ctx, w.r, b, note)
}

// discard forgets an image staged but not activated (best effort: the
// board also forgets it at its next update).
func (w *worker) discard(ctx context.Context) {
	v, err := w.status(ctx)
	if err == nil && w.staged(v) && (v.boots == nil || v.boots.Label == v.running.Label) {
		_ = w.call(ctx, http.MethodDelete, "/ota/image", nil, nil)
	}
}

// step does one step; wait asks the caller to poll again later.
func (w *worker) step(ctx context.Context, b *Board, rstate string) (wait bool, err error) {
	stopping := rstate == StateAborted || rstate == StateReverting
	if stopping && (b.Phase == PhasePending) {
		return false, w.to(ctx, b, PhaseCancelled, "rollout "+rstate)
	}
	v, err := w.status(ctx)
	if err != nil {
		return false, err
	}
	switch b.Phase {
	case PhasePending:
		if w.isTarget(v.running.App) && state(v.running) == "confirmed" {
			return false, w.to(ctx, b, PhaseSkipped, "already runs "+w.rollout().Image.App.Version)
		}
		if busy(v.st.Session.State) {
			return false, fmt.Errorf("%w: an update is in progress on the board (%s)", errTransient, v.st.Session.State)
		}
		if rstate == StateRunning {
			plan := w.rollout().Plan
			verdict, err := w.e.gate(ctx, &plan, w.id)
			if err != nil {
				return false, err
			}
			if verdict.Skip {
				return false, w.end(ctx, b, PhaseSkipped, "skipped: "+verdict.Why())
			}
			if why := verdict.Why(); why != "" {
				return false, w.hold(ctx, b, why)
			}
		}
		if done, err := w.refuse(ctx, b, v); done {
			return false, err
		}
		b.Waiting = ""
		b.FromSlot = v.running.Label
		if v.running.App != nil {
			b.FromVersion = v.running.App.Version
		}
		b.ToSlot = v.other()
		b.Inline = w.inline(rstate)
		if err := w.to(ctx, b, PhaseStaging, "from "+b.FromVersion+" on "+b.FromSlot); err != nil {
			return false, err
		}
		// The board was read a moment ago: go on from that view.
		return w.staging(ctx, b, v, rstate)

	case PhaseStaging, PhaseStaged:
		return w.staging(ctx, b, v, rstate)
	case PhaseActivating:
		// Past the decision: an abort lets it finish.
		switch {
		case v.running.Label == b.ToSlot && w.isTarget(v.running.App):
		case v.boots != nil && v.boots.Label == b.ToSlot && w.isTarget(v.boots.App):
		case w.staged(v):
			if err := w.call(ctx, http.MethodPost, "/ota/activate", map[string]any{"reboot": false}, nil); err != nil {
				return false, err
			}
		case state(v.slot(b.ToSlot)) == "rolled_back" || state(v.slot(b.ToSlot)) == "invalid":
			return false, w.end(ctx, b, PhaseRolledBack, "the board went back to "+v.running.Label)
		default:
			return false, w.to(ctx, b, PhaseStaging, "the staged image is gone before activation: staging again")
		}
		if v.running.Label == b.ToSlot {
			return false, w.to(ctx, b, PhaseRestarting, "runs "+b.ToSlot)
		}
		return false, w.kick(ctx, b, PhaseRestarting, "activated "+b.ToSlot)

	case PhaseRestarting:
		run := v.running
		switch {
		case run.Label == b.ToSlot && w.isTarget(run.App) && state(run) == "confirmed":
			return false, w.to(ctx, b, PhaseSucceeded, "runs "+run.App.Version+" confirmed")
		case run.Label == b.ToSlot && w.isTarget(run.App):
			// On trial: wait for the confirmation.
		case state(v.slot(b.ToSlot)) == "rolled_back" || state(v.slot(b.ToSlot)) == "invalid":
			return false, w.end(ctx, b, PhaseRolledBack, fmt.Sprintf("back on %s (%s): the new image was %s", run.Label, appVersion(run.App), state(v.slot(b.ToSlot))))
		case v.boots != nil && v.boots.Label == b.ToSlot && w.now().Sub(b.Kicked) >= w.e.o.Kick:
			return false, w.kick(ctx, b, PhaseRestarting, "no restart yet: restarting again")
		}
		if !w.now().Before(b.Deadline) {
			return false, w.end(ctx, b, PhaseTimedOut, fmt.Sprintf("not running the new image confirmed by the deadline (running %s %s %s)", run.Label, appVersion(run.App), state(run)))
		}
		return true, nil

	case PhaseSucceeded: // revert
		b.Deadline = w.deadline()
		return false, w.to(ctx, b, PhaseReverting, "back to "+b.FromSlot)

	case PhaseReverting:
		run := v.running
		switch {
		case run.Label == b.FromSlot && state(run) == "confirmed":
			return false, w.to(ctx, b, PhaseReverted, "runs "+appVersion(run.App)+" again")
		case run.Label == b.FromSlot:
		case v.boots == nil || v.boots.Label != b.FromSlot:
			if err := w.call(ctx, http.MethodPost, "/ota/activate", map[string]any{"slot": b.FromSlot, "reboot": false}, nil); err != nil {
				return false, err
			}
			return false, w.kick(ctx, b, PhaseReverting, "activated "+b.FromSlot)
		case w.now().Sub(b.Kicked) >= w.e.o.Kick:
			return false, w.kick(ctx, b, PhaseReverting, "no restart yet: restarting again")
		}
		if !w.now().Before(b.Deadline) {
			return false, w.end(ctx, b, PhaseFailed, "revert: the board is not back on its previous image by the deadline")
		}
		return true, nil
	}
	return false, fmt.Errorf("rollout: board %s in unknown phase %q", b.Board, b.Phase)
}

// inline reports whether an upload starting now carries the activation:
// a push inside the window of a running rollout with no restart cap.
func (w *worker) inline(rstate string) bool {
	p := w.rollout().Plan
	return p.Method == MethodPush && p.MaxRestarting == 0 && rstate == StateRunning && p.Window.Open(w.now())
}

// staging is the step of a board in phase staging or staged: send the
// image, note it staged, activate it inside the window.
func (w *worker) staging(ctx context.Context, b *Board, v view, rstate string) (wait bool, err error) {
	if b.ToSlot == "" {
		b.ToSlot = v.other()
	}
	if b.Inline && b.Phase == PhaseStaging {
		// The upload carries the activation: past the point of no
		// return once the board took it, even for an abort.
		if done, err := w.afterInline(ctx, b, v); done {
			return false, err
		}
	}
	if rstate == StateAborted || rstate == StateReverting {
		w.discard(ctx)
		return false, w.to(ctx, b, PhaseCancelled, "rollout "+rstate+": staged image discarded")
	}
	if w.staged(v) {
		open := w.rollout().Plan.Window.Open(w.now())
		var via []Step
		if b.Phase == PhaseStaging {
			b.ToSlot = deref(v.st.Session.Slot)
			step := Step{Time: w.now().UTC(), Phase: PhaseStaged, Note: "image staged in " + b.ToSlot}
			if !open {
				return false, w.to(ctx, b, PhaseStaged, step.Note)
			}
			// Inside the window the staged step and the decision to
			// activate go in one write.
			via = []Step{step}
		}
		if !open {
			return false, nil
		}
		if limit := w.rollout().Plan.MaxRestarting; limit > 0 {
			if !w.e.reserveRestart(w.r, b.Board, limit) {
				if b.Phase == PhaseStaging {
					return false, w.to(ctx, b, PhaseStaged, via[0].Note)
				}
				return true, nil // every restart slot is taken: ask again later
			}
			defer w.e.releaseRestart(w.r, b.Board)
		}
		b.Deadline = w.deadline()
		b.Phase, b.NextTry = PhaseActivating, time.Time{}
		return false, w.e.saveVia(ctx, w.r, b, via, "")
	}
	if b.Phase == PhaseStaged {
		return false, w.to(ctx, b, PhaseStaging, "the staged image is gone: staging again")
	}
	if busy(v.st.Session.State) {
		return false, fmt.Errorf("%w: an update is in progress on the board (%s)", errTransient, v.st.Session.State)
	}
	if inline := w.inline(rstate); inline != b.Inline {
		// The window closed (or opened) since the board entered staging:
		// the record says what the upload about to leave carries.
		b.Inline = inline
		if err := w.e.save(ctx, w.r, b, "upload again"); err != nil {
			return false, err
		}
	}
	if done, err := w.refuse(ctx, b, v); done {
		return false, err
	}
	return false, w.transfer(ctx, b, v)
}

// refuse ends the board failed, before anything is sent, when its secure
// boot (as v shows it) would refuse the rollout's image; done reports
// that it did (or that the check itself failed: err, transient, when the
// artifact could not be read).
func (w *worker) refuse(ctx context.Context, b *Board, v view) (done bool, err error) {
	why, err := w.refusedBy(v)
	if err != nil {
		return true, fmt.Errorf("%w: checking the board's keys: %w", errTransient, err)
	}
	if why == "" {
		return false, nil
	}
	return true, w.end(ctx, b, PhaseFailed, why)
}

// afterInline finishes the staging of a board whose upload carried the
// activation and may have gone through unseen (a crash or a lost reply):
// the board boots ToSlot holding the target, already runs it, or came
// back from it. done is false when none of that shows: upload again.
func (w *worker) afterInline(ctx context.Context, b *Board, v view) (done bool, err error) {
	to := v.slot(b.ToSlot)
	if to == nil || !w.isTarget(to.App) {
		return false, nil
	}
	switch {
	case v.running.Label == b.ToSlot || (v.boots != nil && v.boots.Label == b.ToSlot):
		return true, w.restarting(ctx, b, nil, "activated with the upload: "+b.ToSlot+" boots")
	case state(to) == "rolled_back" || state(to) == "invalid":
		return true, w.end(ctx, b, PhaseRolledBack, fmt.Sprintf("back on %s (%s): the new image was %s", v.running.Label, appVersion(v.running.App), state(to)))
	}
	return false, nil
}

// restarting records b restarting into ToSlot, its restart asked for now
// (by the upload that carried the activation), after the steps via.
func (w *worker) restarting(ctx context.Context, b *Board, via []Step, note string) error {
	b.Phase, b.NextTry, b.Kicked = PhaseRestarting, time.Time{}, w.now().UTC()
	b.Deadline = w.deadline()
	return w.e.saveVia(ctx, w.r, b, via, note)
}

// deadline is when a board activated now must run its new image (or be
// back on its old one) confirmed: the plan's restart and confirm
// timeouts from now.
func (w *worker) deadline() time.Time {
	t := w.rollout().Plan.Timeouts
	return w.now().Add(t.Restart.D() + t.Confirm.D()).UTC()
}

func busy(session string) bool {
	return session == boardapi.SessionReceiving || session == boardapi.SessionDownloading || session == boardapi.SessionVerifying
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func appVersion(a *boardapi.App) string {
	if a == nil {
		return "?"
	}
	return a.Version
}

// kick records that a restart is asked for, then asks. The record comes
// first: a gateway that dies between the two waits Options.Kick before
// asking again, so a board is never restarted twice in a row (a second
// restart during a trial would roll the new image back).
func (w *worker) kick(ctx context.Context, b *Board, phase, note string) error {
	b.Phase, b.Kicked = phase, w.now().UTC()
	if err := w.e.save(ctx, w.r, b, note); err != nil {
		return err
	}
	if err := w.call(ctx, http.MethodPost, "/restart", map[string]any{"delay_ms": w.e.o.RestartDelay.Milliseconds()}, nil); err != nil {
		w.e.o.Log.Warn("rollout: restart request", "board", w.id, "err", err)
	}
	return nil
}

// transfer gets the image onto the board: staged, or with b.Inline
// activated with a restart coming. v is the board's GET /ota.
func (w *worker) transfer(ctx context.Context, b *Board, v view) error {
	img := w.rollout().Image
	tctx, cancel := context.WithTimeout(ctx, w.rollout().Plan.Timeouts.Transfer.D())
	defer cancel()
	if w.rollout().Plan.Method == MethodPull {
		if err := w.pullDelta(tctx, b, v, img); err != nil || b.Transfer == TransferDelta {
			return err
		}
		if err := w.pull(tctx, "/images/"+img.SHA256+".bin", nil); err != nil {
			return err
		}
		b.Transfer, b.Sent = TransferFull, img.Size
		return w.e.save(ctx, w.r, b, fmt.Sprintf("pulled the whole image, %d bytes", img.Size))
	}
	query := ""
	var s boardapi.OTASession
	var out any
	if b.Inline {
		query, out = "&activate=1&reboot=1", &s
	}
	if err := w.send(tctx, b, v, img, query, out); err != nil {
		return err
	}
	note := fmt.Sprintf("sent the whole image, %d bytes", b.Sent)
	if b.Transfer == TransferDelta {
		note = fmt.Sprintf("sent a delta of %d bytes from %s (the image is %d)", b.Sent, short(v.running.SHA256), img.Size)
	}
	if !b.Inline || s.State != boardapi.SessionActive || !s.BootsNext {
		// Not staged with the activation (or not what an upload carrying
		// it answers): the next step reads GET /ota and goes on from what
		// the board shows.
		return w.e.save(ctx, w.r, b, note)
	}
	now := w.now().UTC()
	via := []Step{{Time: now, Phase: PhaseStaged, Note: "image staged in " + b.ToSlot + "; " + note},
		{Time: now, Phase: PhaseActivating, Note: "activated with the upload"}}
	return w.restarting(ctx, b, via, "restarting into "+b.ToSlot)
}

// DeltaSource is what the engine needs to send deltas: the delta from
// the image a board runs (base) to the rollout's image, or an error
// (artifact.ErrNoDelta when none is worth sending). The artifact store
// implements it; an Artifacts without it sends whole images.
type DeltaSource interface {
	OpenDelta(ctx context.Context, base, target string) (*os.File, int64, error)
}

// send puts the image on the board: a delta when the board runs an image
// the gateway has a delta from (the board shows its running image's
// SHA-256 in GET /ota only with the ota-delta extension), the whole
// image otherwise. Any failure of a delta makes the board's record say so
// (NoDelta) and the whole image goes at once; the board's record says
// which went and how many bytes.
func (w *worker) send(ctx context.Context, b *Board, v view, img Image, query string, out any) error {
	if base := v.running.SHA256; base != "" && base != img.SHA256 && b.NoDelta == "" && !w.rollout().Plan.FullImages {
		if ds, ok := w.e.o.Artifacts.(DeltaSource); ok {
			f, n, err := ds.OpenDelta(ctx, base, img.SHA256)
			if err == nil {
				err = w.put(ctx, f, n, "?base="+base+"&sha256="+img.SHA256+query, out)
				f.Close()
				if err == nil {
					b.Transfer, b.Sent = TransferDelta, n
					return nil
				}
				b.NoDelta = err.Error()
				w.e.o.Log.Warn("rollout: delta refused, sending the whole image", "board", w.id, "base", base, "err", err)
				if serr := w.e.save(ctx, w.r, b, "delta failed, sending the whole image: "+err.Error()); serr != nil {
					return serr
				}
				if ctx.Err() != nil {
					return err
				}
			} else if !errors.Is(err, artifact.ErrNoDelta) {
				w.e.o.Log.Warn("rollout: no delta, sending the whole image", "board", w.id, "base", base, "err", err)
			}
		}
	}
	f, _, err := w.e.o.Artifacts.Open(img.SHA256)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := w.put(ctx, f, img.Size, "?sha256="+img.SHA256+query, out); err != nil {
		return err
	}
	b.Transfer, b.Sent = TransferFull, img.Size
	return nil
}

// put sends size bytes of f with PUT /ota/image?query through the
// rollout's bandwidth limit; a 2xx reply is decoded into out unless it is
// nil.
func (w *worker) put(ctx context.Context, f *os.File, size int64, query string, out any) error {
	body := &meteredReader{ctx: ctx, r: io.NewSectionReader(f, 0, size), lim: w.r.lim,
		count: func(n int) { w.e.bytesSent.Add(uint64(n)); w.r.sent.Add(uint64(n)) }}
	rep, err := w.e.o.Fleet.CallRaw(ctx, w.id, http.MethodPut, "/ota/image"+query, "application/octet-stream", body, size)
	if err != nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: transfer timed out after %v", errTransient, w.rollout().Plan.Timeouts.Transfer.D())
	}
	return w.reply(rep, err, out)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// pullDelta asks a board that runs an image the gateway has a delta from
// (as send does for a push) to pull that delta (its URL names the base:
// <PullBase>deltas/<base>/<target>.bin). It returns nil with b.Transfer
// left unset when no delta applies or it failed: any failure of a delta
// is written on the board's row (NoDelta) and the whole image follows.
func (w *worker) pullDelta(ctx context.Context, b *Board, v view, img Image) error {
	base := v.running.SHA256
	if base == "" || base == img.SHA256 || b.NoDelta != "" || w.rollout().Plan.FullImages {
		return nil
	}
	ds, ok := w.e.o.Artifacts.(DeltaSource)
	if !ok {
		return nil
	}
	f, n, err := ds.OpenDelta(ctx, base, img.SHA256) // made now if it was not
	if err != nil {
		if !errors.Is(err, artifact.ErrNoDelta) {
			w.e.o.Log.Warn("rollout: no delta, the board pulls the whole image", "board", w.id, "base", base, "err", err)
		}
		return nil
	}
	f.Close()
	err = w.pull(ctx, "/"+artifact.DeltaPath(base, img.SHA256), &base)
	if err == nil {
		b.Transfer, b.Sent = TransferDelta, n
		return w.e.save(ctx, w.r, b, fmt.Sprintf("pulled a delta of %d bytes from %s (the image is %d)", n, short(base), img.Size))
	}
	if ctx.Err() != nil {
		return err
	}
	b.NoDelta = err.Error()
	w.e.o.Log.Warn("rollout: delta pull failed, the board pulls the whole image", "board", w.id, "base", base, "err", err)
	return w.e.save(ctx, w.r, b, "delta pull failed, pulling the whole image: "+err.Error())
}

// pull asks the board to fetch path under the gateway's pull base (a
// delta from *base when base is set) and waits until it is staged.
func (w *worker) pull(ctx context.Context, path string, base *string) error {
	img := w.rollout().Image
	url := strings.TrimSuffix(w.e.o.PullBase, "/") + path
	req := map[string]any{"url": url, "sha256": img.SHA256, "activate": false}
	if base != nil {
		req["base"] = *base
	}
	if err := w.call(ctx, http.MethodPost, "/ota/pull", req, nil); err != nil {
		return err
	}
	for {
		var s boardapi.OTASession
		if err := w.call(ctx, http.MethodGet, "/ota/image", nil, &s); err != nil {
			return err
		}
		switch s.State {
		case boardapi.SessionStaged:
			return nil
		case boardapi.SessionFailed:
			return fmt.Errorf("pull failed on the board: %s", deref(s.Error))
		}
		if err := w.sleep(ctx, w.e.o.Poll); err != nil {
			return fmt.Errorf("%w: pull: %v", errTransient, err)
		}
	}
}
