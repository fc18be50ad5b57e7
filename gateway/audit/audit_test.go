package audit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/store"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openDB(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// running opens a log and runs it until the test ends.
func running(t *testing.T, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return l
}

func sync1(t *testing.T, l *Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func rec(at time.Duration, who string, role auth.Role, allowed bool, code string, boards ...string) auth.Record {
	return auth.Record{Time: t0.Add(at), Attributes: auth.Attributes{
		Who: auth.Identity{Name: who, Role: role, Token: true}, Surface: auth.SurfaceREST, Verb: auth.VerbAct,
		Resource: auth.ResActions, Kind: "leds", Boards: boards, Client: "10.0.0.9:1234", Operation: "DoAction", RequestID: "r1",
	}, Allowed: allowed, Reason: "because", Code: code}
}

func TestRecordAndQuery(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "gw.db"))
	clk := &clock{t: t0.Add(time.Hour)}
	l := running(t, Options{DB: db, Now: clk.now})
	l.Audit(rec(1*time.Second, "ops", auth.RoleOperator, true, "OK", "b1", "b2"))
	l.Audit(rec(2*time.Second, "ops", auth.RoleOperator, false, auth.CodePermissionDenied, "b3"))
	l.Audit(rec(3*time.Second, "kiosk", auth.RoleViewer, false, auth.CodePermissionDenied, "b1"))
	call := rec(4*time.Second, "", auth.RoleNone, false, auth.CodeUnauthenticated)
	call.Verb, call.Resource, call.Method, call.Path, call.Kind = auth.VerbCall, auth.ResBoardAPI, "post", "/ota/pull", ""
	l.Audit(call)
	sync1(t, l)

	ids := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s/%s/%s", e.Time.Sub(t0), e.Token, e.Outcome))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"all, newest first", Filter{}, []string{"4s//denied", "3s/kiosk/denied", "2s/ops/denied", "1s/ops/allowed"}},
		{"token", Filter{Token: "ops"}, []string{"2s/ops/denied", "1s/ops/allowed"}},
		{"board", Filter{Board: "b1"}, []string{"3s/kiosk/denied", "1s/ops/allowed"}},
		{"outcome", Filter{Outcome: OutcomeAllowed}, []string{"1s/ops/allowed"}},
		{"since", Filter{Since: t0.Add(3 * time.Second)}, []string{"4s//denied", "3s/kiosk/denied"}},
		{"until", Filter{Until: t0.Add(3 * time.Second)}, []string{"2s/ops/denied", "1s/ops/allowed"}},
		{"window", Filter{Since: t0.Add(2 * time.Second), Until: t0.Add(4 * time.Second)}, []string{"3s/kiosk/denied", "2s/ops/denied"}},
		{"limit", Filter{Limit: 2}, []string{"4s//denied", "3s/kiosk/denied"}},
		{"none", Filter{Token: "nobody"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.Query(tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ids(got), tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
	got, _ := l.Query(Filter{Limit: 1})
	want := Entry{Time: t0.Add(4 * time.Second), Surface: "rest", Operation: "DoAction", Verb: "call", Resource: "board_api",
		Client: "10.0.0.9:1234", Call: "POST /ota/pull", Outcome: OutcomeDenied, Code: auth.CodeUnauthenticated,
		Reason: "because", RequestID: "r1"}
	if diff := cmp.Diff(got, []Entry{want}); diff != "" {
		t.Errorf("stored entry (-got +want):\n%s", diff)
	}
	for _, bad := range []Filter{{Since: t0, Until: t0}, {Outcome: "maybe"}, {Limit: -1}} {
		if _, err := l.Query(bad); !errors.Is(err, ErrBadFilter) {
			t.Errorf("Query(%+v): %v", bad, err)
		}
	}
	if n := testutil.ToFloat64(l.written.WithLabelValues(OutcomeDenied)); n != 3 {
		t.Errorf("denied written %v", n)
	}
}

func TestReopenKeepsOrderAndCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	db := openDB(t, path)
	clk := &clock{t: t0}
	l, err := Open(Options{DB: db, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for i := range 3 {
		l.Audit(rec(time.Duration(i)*time.Second, "a", auth.RoleAdmin, true, "OK"))
	}
	cancel() // Run writes what is queued before it returns
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openDB(t, path)
	defer db.Close()
	l2, err := Open(Options{DB: db, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if l2.count != 3 || l2.last != uint64(t0.Add(2*time.Second).UnixNano()) {
		t.Errorf("reopened: count %d last %x", l2.count, l2.last)
	}
	// A record from a clock gone back still sorts after the others.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- l2.Run(ctx) }()
	l2.Audit(rec(-time.Hour, "late", auth.RoleAdmin, true, "OK"))
	sync1(t, l2)
	got, _ := l2.Query(Filter{Limit: 1})
	if len(got) != 1 || got[0].Token != "late" {
		t.Errorf("newest = %+v", got)
	}
	cancel()
	<-done
	if err := db.Check(); err != nil {
		t.Error(err)
	}
}

func TestPruneByCountAndAge(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	clk := &clock{t: t0}
	l := running(t, Options{DB: db, Now: clk.now, MaxRecords: 5, MaxAge: time.Hour})
	for i := range 8 {
		l.Audit(rec(time.Duration(i)*time.Minute, "a", auth.RoleAdmin, true, "OK"))
	}
	sync1(t, l)
	got, _ := l.Query(Filter{})
	if len(got) != 5 || !got[4].Time.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("kept %d, oldest %v", len(got), got[len(got)-1].Time)
	}
	// An hour and a half later, records older than an hour go.
	clk.add(90 * time.Minute) // now t0+90m: keep from t0+30m
	l.Audit(rec(80*time.Minute, "b", auth.RoleAdmin, true, "OK"))
	sync1(t, l)
	got, _ = l.Query(Filter{})
	if len(got) != 1 || got[0].Token != "b" {
		t.Errorf("after age pruning: %+v", got)
	}
	if n, _ := db.Bucket(Bucket).Len(); n != 1 {
		t.Errorf("%d records stored", n)
	}
}

func TestFullQueueDropsAndSays(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	clk := &clock{t: t0.Add(time.Minute)}
	l, err := Open(Options{DB: db, Now: clk.now, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // not running: two wait, three are dropped
		l.Audit(rec(time.Duration(i)*time.Second, "a", auth.RoleAdmin, false, auth.CodePermissionDenied))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	sync1(t, l)
	cancel()
	<-done
	got, _ := l.Query(Filter{Outcome: OutcomeDropped})
	if len(got) != 1 || !strings.Contains(got[0].Reason, "3 records dropped") {
		t.Errorf("dropped record: %+v", got)
	}
	if all, _ := l.Query(Filter{}); len(all) != 3 {
		t.Errorf("%d records, want 2 and the dropped one", len(all))
	}
	if n := testutil.ToFloat64(l.lost); n != 3 {
		t.Errorf("dropped counter %v", n)
	}
}

func TestClipsCallerText(t *testing.T) {
	r := rec(0, strings.Repeat("n", 300), auth.RoleAdmin, true, "OK")
	r.Path = "/" + strings.Repeat("é", 400)
	r.Method = "POST"
	for i := range 100 {
		r.Boards = append(r.Boards, fmt.Sprint("b", i))
	}
	e := entryOf(r)
	if len(e.Token) > maxField+3 || len(e.Call) > maxField+3 || !strings.HasSuffix(e.Call, "...") {
		t.Errorf("not clipped: %d %d", len(e.Token), len(e.Call))
	}
	if !strings.HasPrefix(e.Call, "POST /é") || strings.ContainsRune(e.Call, '\uFFFD') {
		t.Errorf("clip broke UTF-8: %q", e.Call[:20])
	}
	if len(e.Boards) != maxBoards+1 || e.Boards[maxBoards] != "... 36 more" {
		t.Errorf("boards %d, last %q", len(e.Boards), e.Boards[len(e.Boards)-1])
	}
}

// TestGuardWritesThroughLog: the Guard's records reach the log (the Log
// is the Auditor every surface shares).
func TestGuardWritesThroughLog(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	l := running(t, Options{DB: db})
	g := &auth.Guard{Audit: l}
	op := auth.Identity{Name: "ops", Role: auth.RoleOperator, Token: true}
	_, err := g.Check(auth.Attributes{Who: op, Surface: auth.SurfaceMQTT, Verb: auth.VerbCall, Resource: auth.ResBoardAPI,
		Method: "PATCH", Path: "/web", Boards: []string{"b7"}})
	if !errors.Is(err, auth.ErrForbidden) {
		t.Fatal(err)
	}
	sync1(t, l)
	got, _ := l.Query(Filter{Board: "b7"})
	if len(got) != 1 || got[0].Surface != "mqtt" || got[0].Call != "PATCH /web" || got[0].Role != "operator" {
		t.Errorf("%+v", got)
	}
}

func BenchmarkAuditWrite(b *testing.B) {
	db, err := store.Open(filepath.Join(b.TempDir(), "gw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	l, err := Open(Options{DB: db, Queue: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	r := rec(0, "a", auth.RoleAdmin, true, "OK", "b1")
	b.ReportAllocs()
	for b.Loop() {
		r.Time = time.Now()
		l.Audit(r)
	}
	_ = l.Sync(context.Background())
	cancel()
	<-done
}

// anonRec is a refusal of a caller without a credential (an OSC client).
func anonRec(at time.Duration, client, op string) auth.Record {
	return auth.Record{Time: t0.Add(at), Attributes: auth.Attributes{
		Who: auth.Identity{Name: "osc:" + client}, Surface: auth.SurfaceOSC, Verb: auth.VerbWatch,
		Resource: auth.ResEvents, Client: client, Operation: op,
	}, Reason: "role none", Code: auth.CodePermissionDenied}
}

// TestAnonymousRefusalsAggregatedAndApart: a flood of refusals without a
// credential (issue 25 row 10: 65 OSC packets made 142,412 records and
// pruned everything older) makes one record per source host and second,
// with a count, kept under a quota of its own: the records of
// authenticated callers stay.
func TestAnonymousRefusalsAggregatedAndApart(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	clk := &clock{t: t0} // the flood's seconds end at Sync, not by Run's ticker
	l := running(t, Options{DB: db, Now: clk.now, MaxRecords: 10, MaxAnonymous: 5, Queue: 64})
	for i := range 3 {
		l.Audit(rec(time.Duration(i)*time.Millisecond, "ops", auth.RoleOperator, true, "OK", "b1"))
	}
	sync1(t, l)
	// 20 seconds of flood from two hosts (fresh ports), 1,000 a second
	// each: far beyond the queue (64) and both quotas.
	for s := range 20 {
		for i := range 1000 {
			at := time.Duration(s)*time.Second + time.Duration(i)*time.Microsecond
			l.Audit(anonRec(at, fmt.Sprintf("10.0.0.7:%d", 1024+i), "/holo/all/leds/off"))
			l.Audit(anonRec(at, fmt.Sprintf("10.0.0.8:%d", 1024+i), "/nowhere"))
		}
	}
	sync1(t, l)
	got, err := l.Query(Filter{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var authn, anon []Entry
	for _, e := range got {
		if e.Token == "ops" {
			authn = append(authn, e)
		} else {
			anon = append(anon, e)
		}
	}
	if len(authn) != 3 {
		t.Errorf("%d authenticated records left of 3", len(authn))
	}
	if len(anon) != 5 {
		t.Errorf("%d aggregated records, want the quota (5)", len(anon))
	}
	for _, e := range anon {
		if e.Count != 1000 || e.Outcome != OutcomeDenied || e.Surface != "osc" {
			t.Errorf("aggregated record %+v, want count 1000", e)
		}
	}
	if n := testutil.ToFloat64(l.lost); n != 0 {
		t.Errorf("%v records lost to a full queue", n)
	}
	if n := testutil.ToFloat64(l.aggregated); n != 2*20*999 {
		t.Errorf("aggregated counter %v", n)
	}
	// The newest (second 19, both hosts) are kept, newest first.
	if len(anon) > 0 && !anon[0].Time.Equal(t0.Add(19*time.Second)) {
		t.Errorf("newest aggregated record at %v", anon[0].Time)
	}
}

// TestAnonymousFlushedWhenItsSecondIsOver: Run writes an aggregated
// record once the second it stands for is over on the log's clock,
// without a Sync.
func TestAnonymousFlushedWhenItsSecondIsOver(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	clk := &clock{t: t0}
	l := running(t, Options{DB: db, Now: clk.now})
	l.Audit(anonRec(0, "10.0.0.7:1", "/a"))
	l.Audit(anonRec(time.Millisecond, "10.0.0.7:2", "/b"))
	clk.add(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := l.Query(Filter{})
		if len(got) == 1 {
			if got[0].Count != 2 || got[0].Operation != "/a" {
				t.Errorf("%+v", got[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the aggregated record was not written after its second")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
