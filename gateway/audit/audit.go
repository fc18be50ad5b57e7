// Package audit keeps the gateway's audit log: who changed what, from
// where and through which surface, and who was refused.
//
// Every surface (REST, gRPC, the REST upload, MQTT, OSC, the console's
// REST calls, holoctl's) asks the one auth.Guard, and the Guard hands
// its records to a Log (which is an auth.Auditor): every change let in,
// with its outcome, and every request refused, reads included. Reads let
// in are not recorded.
//
// Records are JSON documents in the "audit" bucket of the gateway's bbolt
// store, keyed by 16 hex digits of their time in Unix nanoseconds (made
// strictly increasing, so keys sort in the order records were written):
//
//	audit/0189c5e2a1b3c4d5 = {"time": RFC 3339, "token": ..., "role": ...,
//	    "client": "10.0.0.9:51234", "surface": "rest", "operation": "DoAction",
//	    "verb": "act", "resource": "actions", "boards": [...], "selector": ...,
//	    "kind": "leds", "call": "POST /ota/pull", "name": ...,
//	    "outcome": "allowed|denied|dropped", "code": "OK", "reason": ...,
//	    "request_id": ...}
//
// Audit never blocks a request: records wait in a bounded queue that Run
// writes in batches (one transaction each). When the queue is full the
// record is dropped and counted, and the next batch writes one "dropped"
// record saying how many were lost. The log is bounded by age and by
// number of records; Run prunes the oldest.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/store"
)

// Bucket is the store bucket holding the records.
const Bucket = "audit"

// Defaults of Options.
const (
	DefaultMaxAge     = 90 * 24 * time.Hour
	DefaultMaxRecords = 100_000
	DefaultQueue      = 4096
	// DefaultLimit and MaxLimit bound a query's answer.
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Outcomes of a record.
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
	// OutcomeDropped marks the record standing for records lost to a
	// full queue.
	OutcomeDropped = "dropped"
)

// Errors of the audit log.
var (
	// ErrBadFilter: a query filter that cannot match (since after until,
	// an unknown outcome, a negative limit).
	ErrBadFilter = errors.New("audit: bad filter")
)

// maxField bounds each text field a caller controls (paths, names,
// agents), and maxBoards the boards kept, so one record stays small.
const (
	maxField  = 256
	maxBoards = 64
)

// Entry is one record as kept and as served.
type Entry struct {
	Time time.Time `json:"time"`
	// Token is the identity's name: a token's, "loopback" (demo),
	// "insecure-lab", or "" when nobody was established.
	Token string `json:"token"`
	Role  string `json:"role"`
	// Client is the caller's address (host:port).
	Client    string   `json:"client,omitempty"`
	Surface   string   `json:"surface"`
	Agent     string   `json:"agent,omitempty"`
	Operation string   `json:"operation,omitempty"`
	Verb      string   `json:"verb"`
	Resource  string   `json:"resource"`
	Boards    []string `json:"boards,omitempty"`
	Selector  string   `json:"selector,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	// Call is a raw board call's method and path ("POST /ota/pull").
	Call string `json:"call,omitempty"`
	// Name is the object named: token, artifact, channel, rollout.
	Name    string `json:"name,omitempty"`
	Outcome string `json:"outcome"`
	// Code is the outcome code: OK or a gRPC code name.
	Code      string `json:"code"`
	Reason    string `json:"reason,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Options configure a Log.
type Options struct {
	DB *store.DB
	// MaxAge drops records older than this (0: DefaultMaxAge).
	MaxAge time.Duration
	// MaxRecords keeps at most this many records (0: DefaultMaxRecords).
	MaxRecords int
	// Queue is how many records may wait to be written (0: DefaultQueue).
	Queue int
	// Now is the clock of pruning and of "dropped" records (nil:
	// time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Log is the audit log. Audit and Query are safe for concurrent use; Run
// is its one writer.
type Log struct {
	bucket *store.Bucket
	o      Options

	q       chan Entry
	syncs   chan chan struct{}
	dropped atomic.Uint64

	// The writer's state (Run's goroutine only, after Open).
	last      uint64 // last key written, as a number
	count     int
	lastPrune time.Time

	written *prometheus.CounterVec
	lost    prometheus.Counter
}

// Open opens the log kept in o.DB, counting what it holds.
func Open(o Options) (*Log, error) {
	if o.DB == nil {
		return nil, errors.New("audit: Options.DB is required")
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l := &Log{bucket: o.DB.Bucket(Bucket), o: o, q: make(chan Entry, o.Queue), syncs: make(chan chan struct{}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holo_gateway_audit_records_total",
			Help: "Audit records written, by outcome (allowed, denied, dropped).",
		}, []string{"outcome"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holo_gateway_audit_dropped_total",
			Help: "Audit records lost because the write queue was full.",
		}),
	}
	n, err := l.bucket.Len()
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	l.count = n
	err = l.bucket.Scan("", "", true, func(k string, _ []byte) (bool, error) {
		l.last, _ = strconv.ParseUint(k, 16, 64)
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	if err := l.prune(); err != nil {
		return nil, err
	}
	return l, nil
}

// Collector exports the log's counters.
func (l *Log) Collector() prometheus.Collector { return collector{l} }

type collector struct{ l *Log }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	c.l.written.Describe(ch)
	c.l.lost.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.l.written.Collect(ch)
	c.l.lost.Collect(ch)
}

// Audit queues a record; it never blocks (a full queue drops and counts).
// It makes Log an auth.Auditor.
func (l *Log) Audit(r auth.Record) {
	select {
	case l.q <- entryOf(r):
	default:
		l.dropped.Add(1)
		l.lost.Inc()
	}
}

// entryOf is the stored form of a record, with caller-controlled text
// bounded.
func entryOf(r auth.Record) Entry {
	e := Entry{
		Time: r.Time.UTC(), Token: clip(r.Who.Name), Client: clip(r.Client), Surface: string(r.Surface),
		Agent: clip(r.Agent), Operation: clip(r.Operation), Verb: clip(string(r.Verb)), Resource: clip(string(r.Resource)),
		Selector: clip(r.Selector), Kind: clip(r.Kind), Name: clip(r.Name),
		Code: r.Code, Reason: clip(r.Reason), RequestID: clip(r.RequestID), Outcome: OutcomeDenied,
	}
	if r.Who.Role != auth.RoleNone {
		e.Role = r.Who.Role.String()
	}
	if r.Allowed {
		e.Outcome = OutcomeAllowed
	}
	if r.Method != "" || r.Path != "" {
		e.Call = clip(strings.ToUpper(r.Method) + " " + r.Path)
	}
	for i, b := range r.Boards {
		if i == maxBoards {
			e.Boards = append(e.Boards, fmt.Sprintf("... %d more", len(r.Boards)-maxBoards))
			break
		}
		e.Boards = append(e.Boards, clip(b))
	}
	return e
}

func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "..."
}

// Run writes queued records until ctx ends, then writes what is left.
// It prunes after every batch by number and once a minute by age.
func (l *Log) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return l.write(l.drain(nil))
		case e := <-l.q:
			l.logErr(l.write(l.drain([]Entry{e})))
		case done := <-l.syncs:
			l.logErr(l.write(l.drain(nil)))
			close(done)
		case <-tick.C:
			l.logErr(l.prune())
		}
	}
}

func (l *Log) logErr(err error) {
	if err != nil {
		l.o.Log.Error("audit: write", "err", err)
	}
}

// drain adds every queued record to batch.
func (l *Log) drain(batch []Entry) []Entry {
	for {
		select {
		case e := <-l.q:
			batch = append(batch, e)
		default:
			return batch
		}
	}
}

// Sync waits until every record queued before it is written (Run must be
// running), or ctx ends.
func (l *Log) Sync(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case l.syncs <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write stores a batch in one transaction, with a "dropped" record first
// when records were lost since the last batch.
func (l *Log) write(batch []Entry) error {
	if n := l.dropped.Swap(0); n > 0 {
		batch = append([]Entry{{Time: l.o.Now().UTC(), Outcome: OutcomeDropped, Code: auth.CodeResourceExhausted,
			Reason: fmt.Sprintf("%d records dropped: the audit queue was full", n)}}, batch...)
	}
	if len(batch) == 0 {
		return nil
	}
	puts := make(map[string]any, len(batch))
	for _, e := range batch {
		k := max(uint64(e.Time.UnixNano()), l.last+1)
		l.last = k
		puts[key(k)] = e
	}
	if err := l.bucket.Batch(puts); err != nil {
		return fmt.Errorf("audit: write %d records: %w", len(batch), err)
	}
	for _, e := range batch {
		l.written.WithLabelValues(e.Outcome).Inc()
	}
	l.count += len(batch)
	if l.count > l.o.MaxRecords {
		n, err := l.bucket.DeleteFirst(l.count-l.o.MaxRecords, "")
		l.count -= n
		if err != nil {
			return fmt.Errorf("audit: prune: %w", err)
		}
	}
	if l.o.Now().Sub(l.lastPrune) > time.Minute {
		return l.prune()
	}
	return nil
}

func key(n uint64) string { return fmt.Sprintf("%016x", n) }

func keyOf(t time.Time) string {
	if t.Before(time.Unix(0, 0)) {
		return key(0)
	}
	return key(uint64(t.UnixNano()))
}

// prune drops records older than MaxAge and beyond MaxRecords.
func (l *Log) prune() error {
	now := l.o.Now()
	l.lastPrune = now
	before := keyOf(now.Add(-l.o.MaxAge))
	for {
		n, err := l.bucket.DeleteFirst(10_000, before)
		l.count -= n
		if err != nil {
			return fmt.Errorf("audit: prune: %w", err)
		}
		if n < 10_000 {
			break
		}
	}
	if l.count > l.o.MaxRecords {
		n, err := l.bucket.DeleteFirst(l.count-l.o.MaxRecords, "")
		l.count -= n
		if err != nil {
			return fmt.Errorf("audit: prune: %w", err)
		}
	}
	return nil
}

// Filter selects records; zero fields select everything.
type Filter struct {
	// Since and Until bound the records' time: Since <= time < Until.
	Since, Until time.Time
	// Token is an identity's name.
	Token string
	// Board keeps records naming this board among their targets.
	Board string
	// Outcome is allowed, denied or dropped.
	Outcome string
	// Limit is the most records returned (0: DefaultLimit; at most
	// MaxLimit).
	Limit int
}

// Check reports a filter that cannot be served (ErrBadFilter).
func (f Filter) Check() error {
	switch {
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until):
		return fmt.Errorf("%w: since %s is not before until %s", ErrBadFilter, f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	case f.Outcome != "" && f.Outcome != OutcomeAllowed && f.Outcome != OutcomeDenied && f.Outcome != OutcomeDropped:
		return fmt.Errorf("%w: outcome %q (allowed, denied or dropped)", ErrBadFilter, f.Outcome)
	case f.Limit < 0:
		return fmt.Errorf("%w: limit %d", ErrBadFilter, f.Limit)
	}
	return nil
}

func (f Filter) match(e Entry) bool {
	return (f.Since.IsZero() || !e.Time.Before(f.Since)) && (f.Until.IsZero() || e.Time.Before(f.Until)) &&
		(f.Token == "" || e.Token == f.Token) &&
		(f.Outcome == "" || e.Outcome == f.Outcome) &&
		(f.Board == "" || slices.Contains(e.Boards, f.Board))
}

// Query returns the records f selects, newest first. Records still in the
// queue are not seen: Sync first to read one's own writes.
func (l *Log) Query(f Filter) ([]Entry, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	var from, to string
	if !f.Since.IsZero() {
		from = keyOf(f.Since)
	}
	if !f.Until.IsZero() {
		to = keyOf(f.Until)
	}
	out := []Entry{}
	err := l.bucket.Scan(from, to, true, func(k string, raw []byte) (bool, error) {
		var e Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return false, fmt.Errorf("audit: record %s: %w", k, err)
		}
		if f.match(e) {
			out = append(out, e)
		}
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: query: %w", err)
	}
	return out, nil
}
