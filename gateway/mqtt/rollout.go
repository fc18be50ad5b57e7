package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// Firmware over MQTT: the bridge follows the rollout engine and shows
//
//	bridge/rollout/<id>   retained: the rollout's state, wave, progress counts,
//	                      its image's trust ("trusted", "signed", "unsigned")
//	                      and signers, and every board's phase (by topic
//	                      name), after each of its events; cleared once
//	                      Options.KeepRollouts newer rollouts finished
//	bridge/event          {"type":"rollout", rollout, n, board, board_id,
//	                      state, phase, wave, note} for every rollout event
//	<b>/update            the HA update entity (see updatePayload); its
//	                      release_summary says who signed the offered
//	                      image ("unsigned image: ..." when no one did)
//
// The "rollout" request takes {"action", "id", "plan", "reason"}: create
// and dry_run a plan (the REST API's JSON; board names may stand for ids),
// get, boards and list, pause, resume, abort and revert an id.
//
// Installing firmware (<base>/+/set/update, rollout create, resume,
// revert) needs admin, as over the REST API; pause and abort are the
// operators' brakes (gateway/mqtt/policy).

// DefaultUpdateChannel is the release channel whose image the HA update
// entities offer and install.
const DefaultUpdateChannel = "stable"

// DefaultKeepRollouts is how many finished rollouts keep their retained
// topic by default: the broker does not collect every rollout ever run.
const DefaultKeepRollouts = 20

// FirmwareChannels is what the bridge needs of the firmware store
// (*artifact.Store): the release channels, and the artifacts they name
// (who signed them, for the update entities' release summary).
type FirmwareChannels interface {
	Channels() ([]artifact.Channel, error)
	Get(sha string) (artifact.Artifact, error)
}

// Rollout request actions (the topic layout's, named here for the
// bridge's handler).
const (
	RolloutCreate = layout.RolloutCreate
	RolloutDryRun = layout.RolloutDryRun
	RolloutGet    = layout.RolloutGet
	RolloutBoards = layout.RolloutBoards
	RolloutList   = layout.RolloutList
	RolloutPause  = layout.RolloutPause
	RolloutResume = layout.RolloutResume
	RolloutAbort  = layout.RolloutAbort
	RolloutRevert = layout.RolloutRevert
)

// rolloutActions lists the actions with the fields each takes.
var rolloutActions = map[string][]string{
	RolloutCreate: {"plan"}, RolloutDryRun: {"plan"}, RolloutGet: {"id"}, RolloutBoards: {"id"}, RolloutList: {},
	RolloutPause: {"id", "reason"}, RolloutResume: {"id"}, RolloutAbort: {"id", "reason"}, RolloutRevert: {"id", "reason"},
}

// phasePercent is how far a board in a running phase is, for HA's
// update_percentage (the engine reports phases, not bytes).
var phasePercent = map[string]float64{
	rollout.PhaseStaging: 10, rollout.PhaseStaged: 40, rollout.PhaseActivating: 60,
	rollout.PhaseRestarting: 80, rollout.PhaseReverting: 50,
}

// rolloutRequest runs the "rollout" request through the engine.
func (b *Bridge) rolloutRequest(ctx context.Context, body json.RawMessage) (any, error) {
	m, err := cmdbody.Object(body)
	if err != nil {
		return nil, err
	}
	action, _, err := cmdbody.String(m, "action", 16)
	if err != nil {
		return nil, err
	}
	fields, ok := rolloutActions[action]
	if !ok {
		return nil, fmt.Errorf("%w: rollout: action %q (create, dry_run, get, boards, list, pause, resume, abort, revert)",
			ErrBadCommand, action)
	}
	if err := cmdbody.OnlyKeys(m, "rollout "+action, append(fields, "action")...); err != nil {
		return nil, err
	}
	id, _, err := cmdbody.String(m, "id", 64)
	if err != nil {
		return nil, err
	}
	reason, _, err := cmdbody.String(m, "reason", 256)
	if err != nil {
		return nil, err
	}
	if len(fields) > 0 && fields[0] == "id" && id == "" {
		return nil, fmt.Errorf("%w: rollout %s: give id", ErrBadCommand, action)
	}
	eng := b.o.Rollouts
	switch action {
	case RolloutCreate, RolloutDryRun:
		raw, ok := m["plan"]
		if !ok {
			return nil, fmt.Errorf("%w: rollout %s: give plan", ErrBadCommand, action)
		}
		var p rollout.Plan
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("%w: rollout plan: %v", ErrBadCommand, err)
		}
		b.planIDs(&p)
		if action == RolloutDryRun {
			return eng.DryRun(ctx, p)
		}
		return eng.Create(ctx, p)
	case RolloutGet:
		return eng.Get(id)
	case RolloutBoards:
		return eng.Boards(id)
	case RolloutList:
		return eng.List(), nil
	case RolloutPause:
		return eng.Pause(ctx, id, reason)
	case RolloutResume:
		return eng.Resume(ctx, id)
	case RolloutAbort:
		return eng.Abort(ctx, id, reason)
	default: // RolloutRevert
		return eng.Revert(ctx, id, reason)
	}
}

// planIDs turns the board names of a plan into ids (ids and unknown
// names stay: the engine judges them).
func (b *Bridge) planIDs(p *rollout.Plan) {
	for i, n := range p.Target.Boards {
		if id, ok := b.resolve(n); ok {
			p.Target.Boards[i] = id
		}
	}
	for i, n := range p.Canaries {
		if id, ok := b.resolve(n); ok {
			p.Canaries[i] = id
		}
	}
}

// install is HA's install command: a one-board rollout of the update
// channel's image.
func (b *Bridge) install(ctx context.Context, boardID string) error {
	if b.o.Firmware == nil {
		return fmt.Errorf("%w: no firmware store", ErrUnsupported)
	}
	c, ok := b.channel()
	if !ok {
		return fmt.Errorf("%w: no release channel %s to install from", ErrUnsupported, b.o.UpdateChannel)
	}
	_, err := b.o.Rollouts.Create(ctx, rollout.Plan{Name: "install " + c.Version + " on " + b.nameOf(boardID) + " (MQTT)",
		Artifact: c.SHA256, Target: rollout.Target{Boards: []string{boardID}}})
	return err
}

// channel reads the update channel.
func (b *Bridge) channel() (artifact.Channel, bool) {
	if b.o.Firmware == nil {
		return artifact.Channel{}, false
	}
	cs, err := b.o.Firmware.Channels()
	if err != nil {
		b.log.Warn("mqtt: reading the release channels", "err", err)
		return artifact.Channel{}, false
	}
	for _, c := range cs {
		if c.Name == b.o.UpdateChannel {
			return c, true
		}
	}
	return artifact.Channel{}, false
}

// channelRelease is the update channel's version ("" when there is
// none) and the release summary of its image.
func (b *Bridge) channelRelease() (version, summary string) {
	c, ok := b.channel()
	if !ok {
		return "", ""
	}
	a, err := b.o.Firmware.Get(c.SHA256)
	if err != nil {
		b.log.Warn("mqtt: reading the update channel's image", "channel", c.Name, "err", err)
		return c.Version, ""
	}
	var signers []string
	for _, sg := range a.Signers {
		if sg.Valid && (sg.Trusted || a.Trust != artifact.TrustTrusted) {
			signers = append(signers, sg.KeyDigest)
		}
	}
	return c.Version, releaseSummary(a.App.Version, a.Trust, signers)
}

// releaseSummary tells, for HA's release_summary, who signed the image of
// version: trust is the artifact's verdict (artifact.TrustTrusted, ...),
// signers the hex digests of the keys that count.
func releaseSummary(version, trust string, signers []string) string {
	short := make([]string, 0, len(signers))
	for _, s := range signers {
		short = append(short, s[:min(16, len(s))])
	}
	keys := strings.Join(short, ", ")
	switch trust {
	case artifact.TrustTrusted:
		return "holo-board " + version + ": signed by " + keys + ", a key the gateway trusts"
	case artifact.TrustSigned:
		return "holo-board " + version + ": signed by " + keys + ", not a key the gateway trusts (boards with secure boot check it)"
	}
	return "holo-board " + version + ": unsigned image (boards with secure boot refuse it)"
}

// followRollouts publishes the rollouts' topics, then every rollout event,
// until ctx ends. A watcher cut off for falling behind is resumed after
// the last event seen.
func (b *Bridge) followRollouts(ctx context.Context) {
	eng := b.o.Rollouts
	w := eng.Watch(ctx, "", 0)
	list := eng.List()
	old := b.oldRollouts(list)
	for _, st := range list {
		if old[st.ID] {
			b.setRetained(b.t.Bridge("rollout/"+st.ID), nil)
			continue
		}
		b.publishRollout(st.ID)
		if !st.Finished {
			if bs, err := eng.Boards(st.ID); err == nil {
				for _, rb := range bs {
					b.boardPhase(st.ID, rb.Board, st.Image, rb.Phase)
				}
			}
		}
	}
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				b.log.Warn("mqtt: fell behind the rollout events; resuming", "after", last)
				w = eng.Watch(ctx, "", last)
				continue
			}
			last = ev.N
			b.rolloutEvent(ev)
		}
	}
}

// rolloutEvent publishes one rollout event.
func (b *Bridge) rolloutEvent(ev rollout.Event) {
	fields := map[string]any{"rollout": ev.Rollout, "n": ev.N, "wave": ev.Wave, "at": ev.Time.Format(time.RFC3339Nano)}
	if ev.Board != "" {
		fields["board"], fields["board_id"] = b.nameOf(ev.Board), ev.Board
	}
	for k, v := range map[string]string{"state": ev.State, "phase": ev.Phase, "note": ev.Note} {
		if v != "" {
			fields[k] = v
		}
	}
	if b.leads() { // in a cluster, one bridge tells the broker
		b.bridgeEvent("rollout", fields)
	}
	st := b.publishRollout(ev.Rollout)
	switch {
	case ev.Board != "":
		b.boardPhase(ev.Rollout, ev.Board, st.Image, ev.Phase)
	case st.Finished:
		// A rollout finished: the oldest finished one may fall out of
		// the kept ones.
		for id := range b.oldRollouts(b.o.Rollouts.List()) {
			b.clearRetained(b.t.Bridge("rollout/" + id))
		}
		// The rollout let its boards go: those it left pending (aborted)
		// fall back to the channel.
		if bs, err := b.o.Rollouts.Boards(ev.Rollout); err == nil {
			for _, rb := range bs {
				if !rollout.Terminal(rb.Phase) {
					b.SetUpdate(rb.Board, Update{})
				}
			}
		}
	}
}

// nameOf is a board's topic name, or its id before the bridge saw it.
func (b *Bridge) nameOf(id string) string {
	if n := b.names.name(id); n != "" {
		return n
	}
	if b.clustered() {
		if n := b.peerName(id); n != "" {
			return n
		}
	}
	return id
}

// oldRollouts are the finished rollouts of list (newest first) past the
// newest KeepRollouts finished ones: their retained topics are cleared.
func (b *Bridge) oldRollouts(list []rollout.Status) map[string]bool {
	old := map[string]bool{}
	kept := 0
	for _, st := range list {
		if !st.Finished || layout.ValidName(st.ID) != nil {
			continue
		}
		if kept++; kept > b.o.KeepRollouts {
			old[st.ID] = true
		}
	}
	return old
}

// publishRollout publishes bridge/rollout/<id> and returns the status.
func (b *Bridge) publishRollout(id string) rollout.Status {
	st, err := b.o.Rollouts.Get(id)
	if err != nil || layout.ValidName(id) != nil {
		return st
	}
	boards := map[string]string{}
	if bs, err := b.o.Rollouts.Boards(id); err == nil {
		for _, rb := range bs {
			boards[b.nameOf(rb.Board)] = rb.Phase
		}
	}
	p := map[string]any{"id": st.ID, "name": st.Plan.Name, "state": st.State, "reason": st.Reason,
		"wave": st.Wave, "waves": len(st.Waves), "finished": st.Finished, "artifact": st.Image.SHA256,
		"version": st.Image.App.Version, "trust": imageTrust(st.Image), "signers": st.Image.Signers, "progress": st.Progress, "boards": boards, "refused": st.Refused,
		"created": st.Created, "updated": st.Updated}
	if !st.SoakUntil.IsZero() {
		p["soak_until"] = st.SoakUntil
	}
	b.setRetained(b.t.Bridge("rollout/"+id), mustJSON(p))
	return st
}

// imageTrust is a rollout image's trust; rollouts created before images
// had one were unsigned (signed images were not kept then).
func imageTrust(img rollout.Image) string {
	if img.Trust == "" {
		return artifact.TrustUnsigned
	}
	return img.Trust
}

// boardPhase sets a board's update entity from its phase in rollout rid
// of version: pending offers version, a running phase is in progress, a
// terminal one lets the entity fall back to the channel. A terminal phase
// that tells what the board runs (succeeded, skipped: version; rolled
// back, reverted: what it ran before) sets installed_version, since the
// engine read it from the board's GET /ota (a board's /info may lag).
func (b *Bridge) boardPhase(rid, id string, img rollout.Image, phase string) {
	version := img.App.Version
	if !rollout.Terminal(phase) {
		summary := releaseSummary(version, img.Trust, img.Signers)
		if phase == rollout.PhasePending {
			b.SetUpdate(id, Update{Latest: version, Summary: summary})
			return
		}
		pc := phasePercent[phase]
		b.SetUpdate(id, Update{Latest: version, Summary: summary, InProgress: true, Percent: &pc})
		return
	}
	b.updates.Delete(id)
	runs := ""
	switch phase {
	case rollout.PhaseSucceeded, rollout.PhaseSkipped:
		runs = version
	case rollout.PhaseRolledBack, rollout.PhaseReverted:
		if bs, err := b.o.Rollouts.Boards(rid); err == nil {
			for _, rb := range bs {
				if rb.Board == id {
					runs = rb.FromVersion
				}
			}
		}
	}
	v, err := b.o.Fleet.Board(id)
	b.vmu.Lock()
	defer b.vmu.Unlock()
	var bi *boardInfo
	if err == nil {
		bi = b.boardLocked(id, &v)
		bi.view = v
	} else if bi = b.boards[id]; bi == nil {
		return
	}
	if runs != "" {
		bi.runs, bi.runsSaw = runs, bi.view.Firmware
	}
	b.publishBoardLocked(bi)
}
