package cluster

// Rollouts in a cluster: one gateway at a time, the coordinator, runs
// the rollout engine (gateway/rollout) over the whole installation. It is
// elected through the holo_lease bucket: the coordinator renews the
// "coordinator" key by compare-and-set every Lease/4, and steps down when
// a renewal fails or has not succeeded for 2/3 of Lease; another gateway
// takes the key (compare-and-set on the revision it saw) once it has seen
// no renewal for a whole Lease by its own clock, or at once when the key
// names an earlier run of itself. The engine's records live in the
// journal (journal.go), fenced: a coordinator that lost the key cannot
// write them. A new coordinator reads the journal and goes on from the
// decisions written there; the engine's steps start from what each board
// reports, so none is updated twice and none is left staged.
//
// Every gateway's rollout API (Rollouts) asks the coordinator by
// request/reply on holo.rollouts.rpc; each image goes to a board from the
// board's own gateway (rawcall.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/rollout"
)

const (
	leaseKey        = "coordinator"
	subjectRollouts = "holo.rollouts.rpc"
)

// lease is the value of the lease key.
type lease struct {
	Name string    `json:"name"`
	Boot string    `json:"boot"`
	Time time.Time `json:"time"`
}

// RolloutOptions configure the rollout engine a coordinator runs.
type RolloutOptions struct {
	// Tune, when set, adjusts the engine's options (Store, Fleet,
	// Artifacts and Log are set by the cluster).
	Tune func(*rollout.Options)
}

// coordinator is this gateway's part in running rollouts.
type coordinator struct {
	c       *Cluster
	o       RolloutOptions
	leading atomic.Bool
	// engine is the running engine while leading.
	mu     sync.Mutex
	engine *rollout.Engine
	// takeovers counts the times this gateway became coordinator.
	takeovers atomic.Uint64
}

// RunRollouts makes this gateway a candidate coordinator; call it (with
// Artifacts) before Run.
func (c *Cluster) RunRollouts(o RolloutOptions) {
	c.co = &coordinator{c: c, o: o}
}

func (c *Cluster) isCoordinator() bool { return c.co != nil && c.co.leading.Load() }

// run campaigns for the lease and runs the engine while it holds it.
func (co *coordinator) run(ctx context.Context) {
	c := co.c
	kv, err := c.bucket(ctx, BucketLease, "holo rollout coordinator's lease")
	if err != nil {
		return
	}
	lease := c.o.Lease
	t := c.clk.NewTicker(lease / 4)
	defer t.Stop()
	var (
		seenRev  uint64    // the lease key's revision last seen
		seenAt   time.Time // when it was first seen, by this clock
		holder   string
		renewed  time.Time // the start of this gateway's last good renewal
		stop     context.CancelFunc
		stopped  chan struct{}
		ownValue = func() []byte {
			b, _ := json.Marshal(struct {
				Name string    `json:"name"`
				Boot string    `json:"boot"`
				Time time.Time `json:"time"`
			}{c.name, c.boot, c.clk.Now().UTC()})
			return b
		}
	)
	stepDown := func(why string) {
		if stop == nil {
			return
		}
		c.log.Warn("cluster: no longer the rollout coordinator", "why", why)
		co.leading.Store(false)
		stop()
		<-stopped
		stop, stopped = nil, nil
	}
	defer stepDown("stopping")
	lead := func(rev uint64) {
		seenRev, seenAt, holder = rev, c.clk.Now(), c.name
		co.leading.Store(true)
		co.takeovers.Add(1)
		c.log.Info("cluster: this gateway is the rollout coordinator")
		ectx, cancel := context.WithCancel(ctx)
		stop, stopped = cancel, make(chan struct{})
		done := stopped
		go func() {
			defer close(done)
			err := co.serve(ectx)
			if err != nil && ectx.Err() == nil {
				c.log.Error("cluster: rollout coordinator stopped", "err", err)
				// Let another gateway (or this one, later) take over.
				co.leading.Store(false)
			}
		}()
	}
	for {
		if reason := c.partitionReason(); reason != "" {
			stepDown("cut off from the engine: " + reason)
		} else if co.leading.Load() {
			if c.clk.Since(renewed) > lease*2/3 {
				stepDown("lease not renewed in time")
			} else {
				start := c.clk.Now()
				actx, cancel := context.WithTimeout(ctx, lease/3)
				rev, err := kv.Update(actx, leaseKey, ownValue(), seenRev)
				cancel()
				switch {
				case err == nil:
					seenRev, renewed = rev, start
				case errors.Is(err, jetstream.ErrKeyExists):
					stepDown("another gateway holds the lease")
				}
			}
		} else {
			if stop != nil {
				stepDown("engine stopped")
			}
			actx, cancel := context.WithTimeout(ctx, lease/3)
			e, err := kv.Get(actx, leaseKey)
			cancel()
			start := c.clk.Now()
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				actx, cancel := context.WithTimeout(ctx, lease/3)
				rev, err := kv.Create(actx, leaseKey, ownValue())
				cancel()
				if err == nil {
					renewed = start
					lead(rev)
				}
			case err == nil:
				var l struct{ Name, Boot string }
				_ = json.Unmarshal(e.Value(), &l)
				if e.Revision() != seenRev {
					seenRev, seenAt, holder = e.Revision(), c.clk.Now(), l.Name
				}
				mine := l.Name == c.name && l.Boot != c.boot // an earlier run of this gateway
				if mine || c.clk.Since(seenAt) > lease {
					actx, cancel := context.WithTimeout(ctx, lease/3)
					rev, err := kv.Update(actx, leaseKey, ownValue(), e.Revision())
					cancel()
					if err == nil {
						c.log.Info("cluster: taking over the rollout coordinator's lease", "from", holder)
						renewed = start
						lead(rev)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// serve runs the engine over the journal and answers the rollout API
// until ctx ends or the journal is fenced.
func (co *coordinator) serve(ctx context.Context) error {
	c := co.c
	if c.arts == nil {
		return fmt.Errorf("%w: rollouts need the cluster's Artifacts", ErrConfig)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	j, err := openJournal(ctx, c)
	if err != nil {
		return err
	}
	// The snapshot fences every earlier coordinator out of the journal.
	if err := j.compact(ctx); err != nil {
		return err
	}
	store := &fencedStore{Journal: j, fenced: func(err error) { cancel(err) }}
	o := rollout.Options{Store: store, Fleet: c, Artifacts: c.arts, Clock: c.clk, Log: c.log.With("part", "rollouts")}
	if co.o.Tune != nil {
		co.o.Tune(&o)
	}
	o.Store, o.Fleet, o.Artifacts = store, c, c.arts
	eng, err := rollout.New(o)
	if err != nil {
		return err
	}
	co.mu.Lock()
	co.engine = eng
	co.mu.Unlock()
	defer func() {
		co.mu.Lock()
		co.engine = nil
		co.mu.Unlock()
	}()
	sub, err := c.nc.Subscribe(subjectRollouts, co.serveRPC(ctx, eng))
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	err = eng.Run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrFenced) {
		return cause
	}
	return err
}

// fencedStore stops the coordinator when the journal is fenced.
type fencedStore struct {
	*Journal
	fenced func(error)
}

func (s *fencedStore) Batch(puts map[string]any) error {
	err := s.Journal.Batch(puts)
	if errors.Is(err, ErrFenced) {
		s.fenced(err)
	}
	return err
}

// rolloutRequest is a rollout API call routed to the coordinator.
type rolloutRequest struct {
	Op     string        `json:"op"`
	Plan   *rollout.Plan `json:"plan,omitempty"`
	ID     string        `json:"id,omitempty"`
	Reason string        `json:"reason,omitempty"`
	After  uint64        `json:"after,omitempty"`
	// At is when it was sent, Caller who made it (sign.go).
	At     time.Time  `json:"at"`
	Caller *rpcCaller `json:"caller,omitempty"`
}

// rolloutReply is the coordinator's answer.
type rolloutReply struct {
	Status    *rollout.Status    `json:"status,omitempty"`
	List      []rollout.Status   `json:"list,omitempty"`
	Selection *rollout.Selection `json:"selection,omitempty"`
	Boards    []rollout.Board    `json:"boards,omitempty"`
	Events    []rollout.Event    `json:"events,omitempty"`
	// Coordinator names the coordinator's run (events are numbered per
	// run).
	Coordinator string    `json:"coordinator"`
	Err         *rpcError `json:"err,omitempty"`
}

// rolloutKinds are the rollout errors that cross gateways.
var rolloutKinds = map[string]error{
	"plan": rollout.ErrPlan, "artifact": rollout.ErrArtifact, "not_found": rollout.ErrNotFound,
	"state": rollout.ErrState, "engine_closed": rollout.ErrClosed,
}

func encodeRolloutErr(err error) *rpcError {
	for k, e := range rolloutKinds {
		if errors.Is(err, e) {
			return &rpcError{Kind: "rollout_" + k, Message: err.Error()}
		}
	}
	return encodeErr(err)
}

func decodeRolloutErr(e *rpcError) error {
	if e == nil {
		return nil
	}
	for k, err := range rolloutKinds {
		if e.Kind == "rollout_"+k {
			return &remoteError{msg: e.Message, err: err}
		}
	}
	return decodeErr(e)
}

// serveRPC answers the rollout API for every gateway.
func (co *coordinator) serveRPC(ctx context.Context, eng *rollout.Engine) nats.MsgHandler {
	c := co.c
	return func(m *nats.Msg) {
		go func() {
			var req rolloutRequest
			rep := rolloutReply{Coordinator: c.name + "/" + c.boot}
			var err error
			if err = json.Unmarshal(m.Data, &req); err == nil {
				var p *auth.Pending
				if p, err = c.checkRollout(m, req); err == nil {
					rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
					err = co.do(rctx, eng, req, &rep)
					cancel()
					p.Done(outcomeCode(err))
				}
			}
			rep.Err = encodeRolloutErr(err)
			data, _ := json.Marshal(rep)
			if int64(len(data)) > c.nc.MaxPayload() {
				data, _ = json.Marshal(rolloutReply{Coordinator: rep.Coordinator,
					Err: encodeErr(fmt.Errorf("%w: the answer is %d bytes", ErrTooLarge, len(data)))})
			}
			c.respondSigned(m, data)
		}()
	}
}

func (co *coordinator) do(ctx context.Context, eng *rollout.Engine, req rolloutRequest, rep *rolloutReply) error {
	var err error
	var st rollout.Status
	switch req.Op {
	case "dry-run", "create":
		if req.Plan == nil {
			return fmt.Errorf("%w: no plan", rollout.ErrPlan)
		}
		if req.Op == "create" {
			st, err = eng.Create(ctx, *req.Plan)
			rep.Status = &st
		} else {
			var sel rollout.Selection
			sel, err = eng.DryRun(ctx, *req.Plan)
			rep.Selection = &sel
		}
	case "get":
		st, err = eng.Get(req.ID)
		rep.Status = &st
	case "list":
		rep.List = eng.List()
	case "boards":
		rep.Boards, err = eng.Boards(req.ID)
	case "pause":
		st, err = eng.Pause(ctx, req.ID, req.Reason)
		rep.Status = &st
	case "resume":
		st, err = eng.Resume(ctx, req.ID)
		rep.Status = &st
	case "abort":
		st, err = eng.Abort(ctx, req.ID, req.Reason)
		rep.Status = &st
	case "revert":
		st, err = eng.Revert(ctx, req.ID, req.Reason)
		rep.Status = &st
	case "events":
		// What the engine keeps after After, without waiting for more.
		wctx, cancel := context.WithCancel(ctx)
		ch := eng.Watch(wctx, req.ID, req.After)
		for len(rep.Events) < 1000 {
			select {
			case ev, ok := <-ch:
				if ok {
					rep.Events = append(rep.Events, ev)
					continue
				}
			default:
			}
			break
		}
		cancel()
	default:
		err = fmt.Errorf("%w: unknown rollout operation %q", rollout.ErrState, req.Op)
	}
	return err
}

// Rollouts is the rollout API of a gateway in a cluster (rollout.Service):
// every call goes to the coordinator, wherever it runs.
type Rollouts struct {
	c   *Cluster
	log *slog.Logger
}

// Rollouts returns the cluster's rollout API.
func (c *Cluster) Rollouts() *Rollouts { return &Rollouts{c: c, log: c.log} }

var _ rollout.Service = (*Rollouts)(nil)

// ask sends one request to the coordinator.
func (r *Rollouts) ask(ctx context.Context, req rolloutRequest) (rolloutReply, error) {
	c := r.c
	if reason := c.partitionReason(); reason != "" {
		return rolloutReply{}, fmt.Errorf("%w: %w: rollouts run cluster-wide: %s", rollout.ErrClosed, ErrPartitioned, reason)
	}
	req.At, req.Caller = c.clk.Now(), c.callerOf(ctx)
	data, _ := json.Marshal(req)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	// No coordinator answers during a takeover: try again for a while.
	var m *nats.Msg
	var err error
	sent := c.signedMsg(subjectRollouts, sigRollouts, data)
	for {
		m, err = c.nc.RequestMsgWithContext(ctx, sent)
		if !errors.Is(err, nats.ErrNoResponders) {
			break
		}
		select {
		case <-ctx.Done():
			return rolloutReply{}, fmt.Errorf("%w: no rollout coordinator answers now", rollout.ErrClosed)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err == nil {
		err = c.checkReply(sent, m)
	}
	if err != nil {
		return rolloutReply{}, fmt.Errorf("%w: rollout coordinator: %v", rollout.ErrClosed, err)
	}
	var rep rolloutReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return rolloutReply{}, fmt.Errorf("cluster: rollout coordinator's answer: %w", err)
	}
	return rep, decodeRolloutErr(rep.Err)
}

func (r *Rollouts) status(ctx context.Context, req rolloutRequest) (rollout.Status, error) {
	rep, err := r.ask(ctx, req)
	if err != nil {
		return rollout.Status{}, err
	}
	if rep.Status == nil {
		return rollout.Status{}, fmt.Errorf("cluster: the coordinator's answer has no status")
	}
	return *rep.Status, nil
}

// DryRun implements rollout.Service.
func (r *Rollouts) DryRun(ctx context.Context, p rollout.Plan) (rollout.Selection, error) {
	rep, err := r.ask(ctx, rolloutRequest{Op: "dry-run", Plan: &p})
	if err != nil || rep.Selection == nil {
		return rollout.Selection{}, err
	}
	return *rep.Selection, nil
}

// Create implements rollout.Service.
func (r *Rollouts) Create(ctx context.Context, p rollout.Plan) (rollout.Status, error) {
	return r.status(ctx, rolloutRequest{Op: "create", Plan: &p})
}

// Get implements rollout.Service.
func (r *Rollouts) Get(id string) (rollout.Status, error) {
	return r.status(context.Background(), rolloutRequest{Op: "get", ID: id})
}

// List implements rollout.Service (empty while no coordinator answers).
func (r *Rollouts) List() []rollout.Status {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := r.ask(ctx, rolloutRequest{Op: "list"})
	if err != nil {
		r.log.Warn("cluster: listing rollouts", "err", err)
		return []rollout.Status{}
	}
	if rep.List == nil {
		rep.List = []rollout.Status{}
	}
	return rep.List
}

// Boards implements rollout.Service.
func (r *Rollouts) Boards(id string) ([]rollout.Board, error) {
	rep, err := r.ask(context.Background(), rolloutRequest{Op: "boards", ID: id})
	return rep.Boards, err
}

// Pause implements rollout.Service.
func (r *Rollouts) Pause(ctx context.Context, id, reason string) (rollout.Status, error) {
	return r.status(ctx, rolloutRequest{Op: "pause", ID: id, Reason: reason})
}

// Resume implements rollout.Service.
func (r *Rollouts) Resume(ctx context.Context, id string) (rollout.Status, error) {
	return r.status(ctx, rolloutRequest{Op: "resume", ID: id})
}

// Abort implements rollout.Service.
func (r *Rollouts) Abort(ctx context.Context, id, reason string) (rollout.Status, error) {
	return r.status(ctx, rolloutRequest{Op: "abort", ID: id, Reason: reason})
}

// Revert implements rollout.Service.
func (r *Rollouts) Revert(ctx context.Context, id, reason string) (rollout.Status, error) {
	return r.status(ctx, rolloutRequest{Op: "revert", ID: id, Reason: reason})
}

// Watch implements rollout.Service by asking the coordinator for new events
// every 250 ms. Events are numbered by the coordinator's run: after a
// takeover the new coordinator's events start again from 1 (and are
// handed out from its first).
func (r *Rollouts) Watch(ctx context.Context, id string, after uint64) <-chan rollout.Event {
	ch := make(chan rollout.Event, rollout.WatchQueue)
	go func() {
		defer close(ch)
		coord := ""
		for {
			rep, err := r.ask(ctx, rolloutRequest{Op: "events", ID: id, After: after})
			if err == nil {
				if coord != "" && rep.Coordinator != coord {
					after = 0 // another coordinator: its own numbers
					coord = rep.Coordinator
					continue
				}
				coord = rep.Coordinator
				for _, ev := range rep.Events {
					select {
					case ch <- ev:
					default:
						return // fell behind
					}
					after = ev.N
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return ch
}

// checkRollout refuses a rollout request no gateway signed, or one
// without a caller, and decides it for its caller as the API would
// (refusals and changes are audited).
func (c *Cluster) checkRollout(m *nats.Msg, req rolloutRequest) (*auth.Pending, error) {
	a := c.routedAttrs(req.Caller, "rollout "+req.Op)
	a.Resource, a.Name = auth.ResRollouts, req.ID
	switch req.Op {
	case "get", "list", "boards", "events", "dry-run":
		a.Verb = auth.VerbRead
	case "create":
		a.Verb = auth.VerbCreate
	case "pause", "abort":
		a.Verb = auth.VerbHalt
	default:
		a.Verb = auth.VerbUpdate
	}
	if err := c.checkSigned(m, sigRollouts, "", req.At); err != nil {
		return nil, c.refuseRouted(a, err)
	}
	if req.Caller == nil {
		return nil, c.refuseRouted(a, fmt.Errorf("%w: rollout request without a caller", auth.ErrNoToken))
	}
	if _, err := req.Caller.identity(); err != nil {
		return nil, c.refuseRouted(a, err)
	}
	return c.o.Guard.Check(a)
}
