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
//
// Refusals of callers without a credential (no token: an OSC client, an
// anonymous MQTT or REST caller) cost an attacker nothing, so they are
// aggregated and kept apart (see Log.Anonymous): at most one record per
// surface, source host and second, with the number of refusals it stands
// for in "count", in the "audit-anon" bucket under a quota of its own
// (MaxAnonymous). A flood of them can neither fill the write queue nor
// evict the records of authenticated callers. Query returns both,
// merged.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/metricname"
	"github.com/holofleet/holofleet/store"
)

// Bucket is the store bucket holding the records; AnonBucket holds the
// aggregated refusals of callers without a credential.
const (
	Bucket     = "audit"
	AnonBucket = "audit-anon"
)

// Defaults of Options.
const (
	DefaultMaxAge     = 90 * 24 * time.Hour
	DefaultMaxRecords = 100_000
	DefaultQueue      = 4096
	// DefaultMaxAnonymous is the quota of aggregated refusals without a
	// credential, apart from DefaultMaxRecords.
	DefaultMaxAnonymous = 10_000
	// MaxAnonymousSources bounds the sources aggregated at once; refusals
	// from further sources in the same second share one record (client
	// "*").
	MaxAnonymousSources = 1024
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

// DefaultAggregate are the surfaces whose refusals without a credential
// Audit aggregates by default: those open to anonymous clients by design.
var DefaultAggregate = []auth.Surface{auth.SurfaceOSC, auth.SurfaceMQTT}

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
	// Count is how many refusals an aggregated record stands for (see
	// Log.Anonymous): the first one's fields, from the same surface and
	// source host within one second; 0 for a record not aggregated.
	Count int `json:"count,omitempty"`
}

// queued is a record waiting to be written, and whether it goes to
// AnonBucket.
type queued struct {
	Entry
	anon bool
}

// Options configure a Log.
type Options struct {
	DB *store.DB
	// MaxAge drops records older than this (0: DefaultMaxAge).
	MaxAge time.Duration
	// MaxRecords keeps at most this many records (0: DefaultMaxRecords).
	MaxRecords int
	// MaxAnonymous keeps at most this many aggregated records of refusals
	// without a credential, apart from MaxRecords (0:
	// DefaultMaxAnonymous).
	MaxAnonymous int
	// Queue is how many records may wait to be written (0: DefaultQueue).
	Queue int
	// Aggregate are the surfaces whose refusals without a credential
	// Audit aggregates (Anonymous); nil: DefaultAggregate. Other
	// surfaces call Anonymous themselves where they choose to.
	Aggregate []auth.Surface
	// Now is the clock of pruning and of "dropped" records (nil:
	// time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Log is the audit log. Audit and Query are safe for concurrent use; Run
// is its one writer.
type Log struct {
	bucket *store.Bucket
	anon   *store.Bucket
	o      Options

	// amu guards agg: the aggregated refusals without a credential not
	// yet queued, by surface and source host.
	amu sync.Mutex
	agg map[string]*queued
	// ready are aggregated records whose second is over, for Run to
	// write (at most Options.Queue).
	ready []queued

	q       chan queued
	syncs   chan chan struct{}
	dropped atomic.Uint64
	// unwritten counts records lost because the store failed to write
	// them (a full or failing disk) since the last batch written.
	unwritten atomic.Uint64

	// The writer's state (Run's goroutine only, after Open).
	last      uint64 // last key written, as a number
	lastAnon  uint64 // last key written in AnonBucket
	count     int
	anonCount int
	lastPrune time.Time

	written    *prometheus.CounterVec
	lost       prometheus.Counter
	aggregated prometheus.Counter
}

// Open opens the log kept in o.DB, counting what it holds.
func Open(o Options) (*Log, error) {
	if o.DB == nil {
		return nil, errors.New("audit: Options.DB is required")
	}
	o.MaxAge = defaults.Positive(o.MaxAge, DefaultMaxAge)
	o.MaxRecords = defaults.Positive(o.MaxRecords, DefaultMaxRecords)
	o.Queue = defaults.Positive(o.Queue, DefaultQueue)
	if o.Aggregate == nil {
		o.Aggregate = DefaultAggregate
	}
	o.MaxAnonymous = defaults.Positive(o.MaxAnonymous, DefaultMaxAnonymous)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Log = defaults.Log(o.Log)
	l := &Log{bucket: o.DB.Bucket(Bucket), anon: o.DB.Bucket(AnonBucket), o: o, q: make(chan queued, o.Queue),
		syncs: make(chan chan struct{}), agg: map[string]*queued{},
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricname.GatewayAuditRecordsTotal,
			Help: "Audit records written, by outcome (allowed, denied, dropped).",
		}, []string{"outcome"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricname.GatewayAuditDroppedTotal,
			Help: "Audit records lost: the write queue was full, or the store failed to write them.",
		}),
		aggregated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricname.GatewayAuditAggregatedTotal,
			Help: "Refusals without a credential folded into the record of an earlier one (same surface, source host and second).",
		}),
	}
	for _, b := range []struct {
		b    *store.Bucket
		n    *int
		last *uint64
	}{{l.bucket, &l.count, &l.last}, {l.anon, &l.anonCount, &l.lastAnon}} {
		n, err := b.b.Len()
		if err != nil {
			return nil, fmt.Errorf("audit: open: %w", err)
		}
		*b.n = n
		err = b.b.Scan("", "", true, func(k string, _ []byte) (bool, error) {
			*b.last, _ = strconv.ParseUint(k, 16, 64)
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("audit: open: %w", err)
		}
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
	c.l.aggregated.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.l.written.Collect(ch)
	c.l.lost.Collect(ch)
	c.l.aggregated.Collect(ch)
}

// Audit queues a record; it never blocks (a full queue drops and counts).
// It makes Log an auth.Auditor. A refusal of a caller without a
// credential on a surface of Options.Aggregate goes to Anonymous: an
// identity without a token other than the demo's loopback admin and the
// insecure lab's (whose refusals, few and telling, are kept one by one).
func (l *Log) Audit(r auth.Record) {
	if !r.Allowed && !r.Who.Token && r.Who.Name != auth.LoopbackName && r.Who.Name != auth.InsecureName &&
		slices.Contains(l.o.Aggregate, r.Surface) {
		l.Anonymous(r)
		return
	}
	l.queue(queued{Entry: entryOf(r)})
}

func (l *Log) queue(e queued) {
	select {
	case l.q <- e:
	default:
		l.dropped.Add(1)
		l.lost.Inc()
	}
}

// Anonymous records r, a request refused to a caller that presented no
// credential, aggregated: the first refusal from a source (r.Surface and
// the host of r.Client) in a second of r.Time makes a record, the next
// ones from that source in that second only add to its Count. The record
// is written once its second is over (Run checks every second), or at
// Sync. It is kept in AnonBucket under Options.MaxAnonymous, so a flood
// of such refusals never evicts other records; at most
// MaxAnonymousSources sources are aggregated at once, the others sharing
// one record (client "*").
//
// Audit calls it for the refusals without a token on the surfaces of
// Options.Aggregate (OSC, MQTT); another surface calls it directly for a
// refusal it wants aggregated, instead of Audit: a request without a
// token, or turned away before it was identified, e.g. in REST
//
//	if id, err := g.Identify(c); err != nil && log != nil {
//		log.Anonymous(auth.Record{Time: now, Attributes: a, Reason: err.Error(), Code: auth.CodeOf(err)})
//	}
//
// (or an auth.Auditor that sends such records here). It never blocks and
// is safe for concurrent use.
func (l *Log) Anonymous(r auth.Record) {
	host := r.Client
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	key := string(r.Surface) + " " + host
	sec := r.Time.Truncate(time.Second)
	var flush *queued
	l.amu.Lock()
	e := l.agg[key]
	if e == nil && len(l.agg) >= MaxAnonymousSources {
		key = string(r.Surface) + " *"
		e = l.agg[key]
	}
	if e != nil && e.Time.Truncate(time.Second).Equal(sec) {
		e.Count++
		l.amu.Unlock()
		l.aggregated.Inc()
		return
	}
	if e != nil {
		flush = e
	}
	ne := queued{Entry: entryOf(r), anon: true}
	ne.Count = 1
	if strings.HasSuffix(key, " *") {
		ne.Client, ne.Token = "*", ""
	}
	l.agg[key] = &ne
	lost := false
	if flush != nil {
		if lost = len(l.ready) >= l.o.Queue; !lost {
			l.ready = append(l.ready, *flush)
		}
	}
	l.amu.Unlock()
	if lost {
		l.dropped.Add(1)
		l.lost.Inc()
	}
}

// takeAnonymous takes the aggregated records of seconds before until
// (all of them for a zero until), oldest first.
func (l *Log) takeAnonymous(until time.Time) []queued {
	l.amu.Lock()
	out := l.ready
	l.ready = nil
	for k, e := range l.agg {
		if until.IsZero() || e.Time.Before(until.Truncate(time.Second)) {
			out = append(out, *e)
			delete(l.agg, k)
		}
	}
	l.amu.Unlock()
	slices.SortFunc(out, func(a, b queued) int { return a.Time.Compare(b.Time) })
	return out
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
// Aggregated refusals (Anonymous) are queued once their second is over.
func (l *Log) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	sec := time.NewTicker(time.Second)
	defer sec.Stop()
	for {
		select {
		case <-ctx.Done():
			return l.write(l.drain(l.takeAnonymous(time.Time{})))
		case e := <-l.q:
			l.logErr(l.write(l.drain([]queued{e})))
		case done := <-l.syncs:
			l.logErr(l.write(l.drain(l.takeAnonymous(time.Time{}))))
			close(done)
		case <-sec.C:
			l.logErr(l.write(l.drain(l.takeAnonymous(l.o.Now()))))
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
func (l *Log) drain(batch []queued) []queued {
	for {
		select {
		case e := <-l.q:
			batch = append(batch, e)
		default:
			return batch
		}
	}
}

// Sync waits until every record queued before it is written, aggregated
// ones included (Run must be running), or ctx ends.
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
func (l *Log) write(batch []queued) error {
	full, failed := l.dropped.Swap(0), l.unwritten.Swap(0)
	marker := 0
	if full+failed > 0 {
		marker = 1
		batch = append([]queued{{Entry: Entry{Time: l.o.Now().UTC(), Outcome: OutcomeDropped, Code: auth.CodeResourceExhausted,
			Reason: lostReason(full, failed)}}}, batch...)
	}
	if len(batch) == 0 {
		return nil
	}
	puts := make(map[string]any, len(batch))
	anon := map[string]any{}
	for _, e := range batch {
		// Keys follow the records' time, strictly increasing in each
		// bucket (aggregated records are written after their second).
		last, m := &l.last, puts
		if e.anon {
			last, m = &l.lastAnon, anon
		}
		k := max(uint64(e.Time.UnixNano()), *last+1)
		*last = k
		m[key(k)] = e.Entry
	}
	for i, b := range []struct {
		b    *store.Bucket
		puts map[string]any
		n    *int
	}{{l.bucket, puts, &l.count}, {l.anon, anon, &l.anonCount}} {
		if len(b.puts) == 0 {
			continue
		}
		if err := b.b.Batch(b.puts); err != nil {
			// The records are gone: counted, so the alert on lost
			// records fires, and told by the next "dropped" record
			// written, which stands for the lost marker too.
			lost := len(b.puts)
			if i == 0 {
				l.dropped.Add(full)
				failed += uint64(lost - marker)
				lost -= marker
			} else {
				failed = uint64(lost)
			}
			l.unwritten.Add(failed)
			l.lost.Add(float64(lost))
			return fmt.Errorf("audit: write %d records: %w", len(b.puts), err)
		}
		*b.n += len(b.puts)
		for _, e := range batch {
			if e.anon == (i == 1) {
				l.written.WithLabelValues(e.Outcome).Inc()
			}
		}
	}
	if err := l.trim(); err != nil {
		return err
	}
	if l.o.Now().Sub(l.lastPrune) > time.Minute {
		return l.prune()
	}
	return nil
}

// lostReason is the reason of the "dropped" record standing for records
// lost to a full queue and to failed writes.
func lostReason(full, failed uint64) string {
	var why []string
	if full > 0 {
		why = append(why, fmt.Sprintf("%d records dropped: the audit queue was full", full))
	}
	if failed > 0 {
		why = append(why, fmt.Sprintf("%d records lost: the store failed to write them", failed))
	}
	return strings.Join(why, "; ")
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
	for _, b := range []struct {
		b *store.Bucket
		n *int
	}{{l.bucket, &l.count}, {l.anon, &l.anonCount}} {
		for {
			n, err := b.b.DeleteFirst(10_000, before)
			*b.n -= n
			if err != nil {
				return fmt.Errorf("audit: prune: %w", err)
			}
			if n < 10_000 {
				break
			}
		}
	}
	return l.trim()
}

// trim drops the oldest records beyond each bucket's quota.
func (l *Log) trim() error {
	for _, b := range []struct {
		b     *store.Bucket
		n     *int
		limit int
	}{{l.bucket, &l.count, l.o.MaxRecords}, {l.anon, &l.anonCount, l.o.MaxAnonymous}} {
		if *b.n > b.limit {
			n, err := b.b.DeleteFirst(*b.n-b.limit, "")
			*b.n -= n
			if err != nil {
				return fmt.Errorf("audit: prune: %w", err)
			}
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
	type keyed struct {
		k string
		e Entry
	}
	var all []keyed
	for _, b := range []*store.Bucket{l.bucket, l.anon} {
		n := 0
		err := b.Scan(from, to, true, func(k string, raw []byte) (bool, error) {
			var e Entry
			if err := json.Unmarshal(raw, &e); err != nil {
				return false, fmt.Errorf("audit: record %s: %w", k, err)
			}
			if f.match(e) {
				all = append(all, keyed{k, e})
				n++
			}
			return n < limit, nil
		})
		if err != nil {
			return nil, fmt.Errorf("audit: query: %w", err)
		}
	}
	slices.SortFunc(all, func(a, b keyed) int { return strings.Compare(b.k, a.k) })
	out := []Entry{}
	for _, k := range all[:min(len(all), limit)] {
		out = append(out, k.e)
	}
	return out, nil
}
