package registry

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/store"
)

func openDB(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	db := openDB(t, path)
	r, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	seen := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	want := []Record{
		{ID: "0a0000000001", Hostname: "holo-0001", Line: "line0", Address: 1, Groups: []int{1},
			Transports: []string{"rs485:line0"}, LastSeen: seen, Firmware: "1.2.0", Labels: map[string]string{"room": "lobby"}},
		{ID: "0a0000000002", Hostname: "holo-0002", URL: "http://127.0.0.1:8080", Groups: []int{},
			Transports: []string{"lan"}, LastSeen: seen, Firmware: "1.2.0", Labels: map[string]string{}},
	}
	if err := r.PutMany(want); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetLabels("0a0000000002", map[string]string{"team/owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	want[1].Labels = map[string]string{"team/owner": "ops"}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openDB(t, path)
	defer db.Close()
	r, err = Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.List(), want); diff != "" {
		t.Errorf("after reopen (-got +want)\n%s", diff)
	}
	got, ok := r.Get("0a0000000001")
	if !ok {
		t.Fatal("Get: missing")
	}
	got.Labels["room"] = "changed" // a copy: the registry must not change
	if again, _ := r.Get("0a0000000001"); again.Labels["room"] != "lobby" {
		t.Errorf("Get returned a shared map")
	}
	if err := r.Delete("0a0000000001"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Get("0a0000000001"); ok || r.Len() != 1 {
		t.Errorf("after Delete: ok=%v len=%d", ok, r.Len())
	}
	if _, err := r.SetLabels("nope", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetLabels unknown: %v, want ErrNotFound", err)
	}
}

func TestLabelValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		ok     bool
	}{
		{"empty set", nil, true},
		{"simple", map[string]string{"room": "lobby"}, true},
		{"all key characters", map[string]string{"a-z.0_9/x": "v"}, true},
		{"empty value", map[string]string{"k": ""}, true},
		{"63-char key", map[string]string{strings.Repeat("k", 63): "v"}, true},
		{"63-char value", map[string]string{"k": strings.Repeat("v", 63)}, true},
		{"printable value", map[string]string{"k": "Hall 2, left (door) ~!"}, true},
		{"empty key", map[string]string{"": "v"}, false},
		{"64-char key", map[string]string{strings.Repeat("k", 64): "v"}, false},
		{"upper-case key", map[string]string{"Room": "v"}, false},
		{"space in key", map[string]string{"my room": "v"}, false},
		{"64-char value", map[string]string{"k": strings.Repeat("v", 64)}, false},
		{"newline in value", map[string]string{"k": "a\nb"}, false},
		{"non-ASCII value", map[string]string{"k": "caf\u00e9"}, false},
		{"DEL in value", map[string]string{"k": "a\x7f"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateLabels(tc.labels)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateLabels(%q) = %v, want ok=%v", tc.labels, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrBadLabel) {
				t.Errorf("error %v does not wrap ErrBadLabel", err)
			}
		})
	}
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	if err := ValidateLabels(many); !errors.Is(err, ErrBadLabel) {
		t.Errorf("%d labels: %v, want ErrBadLabel", len(many), err)
	}
}

func TestBadRecords(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	r, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []Record{{ID: ""}, {ID: "a/b"}, {ID: strings.Repeat("a", 65)}} {
		if err := r.Put(rec); !errors.Is(err, ErrBadID) {
			t.Errorf("Put(id %q) = %v, want ErrBadID", rec.ID, err)
		}
	}
	if err := r.Put(Record{ID: "ok", Labels: map[string]string{"BAD": "x"}}); !errors.Is(err, ErrBadLabel) {
		t.Errorf("Put with bad label = %v, want ErrBadLabel", err)
	}
	if r.Len() != 0 {
		t.Errorf("bad puts stored %d records", r.Len())
	}
	// A record written without slices reads back with empty ones.
	if err := r.Put(Record{ID: "bare"}); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Get("bare")
	if diff := cmp.Diff(got, Record{ID: "bare", Groups: []int{}, Transports: []string{}, Labels: map[string]string{}}); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	// A document that does not decode makes Open fail.
	if err := db.Bucket(Bucket).Put("broken", "not a record"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(db); err == nil {
		t.Error("Open with a broken record succeeded")
	}
}

func BenchmarkPutMany(b *testing.B) {
	db := openDB(b, filepath.Join(b.TempDir(), "gw.db"))
	defer db.Close()
	r, err := Open(db)
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{ID: fmt.Sprintf("%012x", i), Hostname: "holo", Groups: []int{1}, Labels: map[string]string{"room": "a"}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.PutMany(recs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	db := openDB(b, filepath.Join(b.TempDir(), "gw.db"))
	defer db.Close()
	r, _ := Open(db)
	if err := r.Put(Record{ID: "0a0000000001", Groups: []int{1, 2}, Labels: map[string]string{"room": "a"}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Get("0a0000000001"); !ok {
			b.Fatal("missing")
		}
	}
}
