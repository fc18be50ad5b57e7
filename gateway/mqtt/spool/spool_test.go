package spool

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/holofleet/holofleet/store"
)

func msg(i int) Message {
	return Message{Topic: fmt.Sprintf("t/%d", i), Payload: []byte{byte(i), byte(i >> 8)}, QoS: 1}
}

func openDB(t testing.TB) *store.DB {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// drain pops everything, n at a time.
func drain(q *Queue, n int) []Message {
	var out []Message
	for {
		ms := q.Pop(n)
		if ms == nil {
			return out
		}
		out = append(out, ms...)
	}
}

// TestOrderAcrossSpill pushes past memory into the bucket, with pops in
// between, and gets everything back in push order.
func TestOrderAcrossSpill(t *testing.T) {
	q, err := Open(Options{DB: openDB(t), Mem: 8, Chunk: 4, Disk: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []Message
	for i := range 100 {
		if err := q.Push(msg(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, msg(i))
		if i%17 == 0 {
			got = append(got, q.Pop(3)...)
		}
	}
	if st := q.Stats(); st.Spilled == 0 || st.Len != 100-len(got) {
		t.Errorf("stats %+v", st)
	}
	got = append(got, drain(q, 5)...)
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("order (-got +want)\n%s", diff)
	}
}

// TestReopen flushes at shutdown and takes the messages back, in order,
// on the next Open.
func TestReopen(t *testing.T) {
	db := openDB(t)
	q, _ := Open(Options{DB: db, Mem: 4, Chunk: 2})
	var want []Message
	for i := range 11 {
		_ = q.Push(msg(i))
		want = append(want, msg(i))
	}
	want = want[2:]
	q.Pop(2)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	q2, err := Open(Options{DB: db, Mem: 4, Chunk: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(drain(q2, 3), want); diff != "" {
		t.Errorf("after reopen (-got +want)\n%s", diff)
	}
	if err := db.Check(); err != nil {
		t.Error(err)
	}
}

// TestBounds drops past the bounds and counts it.
func TestBounds(t *testing.T) {
	q, _ := Open(Options{Mem: 3})
	for i := range 5 {
		err := q.Push(msg(i))
		if (i < 3) != (err == nil) || err != nil && !errors.Is(err, ErrFull) {
			t.Errorf("push %d: %v", i, err)
		}
	}
	if st := q.Stats(); st.Dropped != 2 || st.Queued != 3 {
		t.Errorf("stats %+v", st)
	}
	qd, _ := Open(Options{DB: openDB(t), Mem: 2, Chunk: 2, Disk: 4})
	n := 0
	for i := range 20 {
		if qd.Push(msg(i)) == nil {
			n++
		}
	}
	if got := len(drain(qd, 10)); got != n || n < 6 || n > 8 {
		t.Errorf("kept %d, drained %d", n, got)
	}
}

// TestSplit: a total bound (holo-gateway --mqtt-spool-max) gives a queue
// that keeps exactly that many messages, in memory or spilled, and drops
// the next one.
func TestSplit(t *testing.T) {
	for _, tc := range []struct{ max, mem, disk int }{
		{0, 0, 0},
		{-5, 0, 0},
		{1, 1, -1},
		{50, 50, -1},
		{DefaultMem, DefaultMem, -1},
		{DefaultMem + 1, DefaultMem, 1},
		{DefaultMem + DefaultDisk, DefaultMem, DefaultDisk},
	} {
		mem, disk := Split(tc.max)
		if mem != tc.mem || disk != tc.disk {
			t.Errorf("Split(%d) = %d, %d; want %d, %d", tc.max, mem, disk, tc.mem, tc.disk)
		}
	}
	for _, max := range []int{50, DefaultMem + 300} {
		mem, disk := Split(max)
		q, err := Open(Options{DB: openDB(t), Mem: mem, Disk: disk})
		if err != nil {
			t.Fatal(err)
		}
		for i := range max {
			if err := q.Push(msg(i)); err != nil {
				t.Fatalf("max %d: push %d: %v", max, i, err)
			}
		}
		if err := q.Push(msg(max)); !errors.Is(err, ErrFull) {
			t.Errorf("max %d: push past the bound: %v", max, err)
		}
		if st := q.Stats(); st.Dropped != 1 || st.Len != max {
			t.Errorf("max %d: stats %+v", max, st)
		}
	}
}

// FuzzSpool runs push/pop scripts and compares with a slice.
func FuzzSpool(f *testing.F) {
	f.Add([]byte{1, 1, 1, 0, 1, 2, 2, 1, 1, 1, 1, 1, 0, 0, 0})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 300 {
			return
		}
		db := openDB(t)
		q, _ := Open(Options{DB: db, Mem: 3, Chunk: 2, Disk: 50})
		var model []Message
		next := 0
		for _, op := range script {
			switch op % 4 {
			case 0, 1:
				if q.Push(msg(next)) == nil {
					model = append(model, msg(next))
				}
				next++
			case 2:
				got := q.Pop(int(op%5) + 1)
				if len(got) > len(model) || !cmp.Equal(got, model[:len(got)], cmpopts.EquateEmpty()) {
					t.Fatalf("pop %v, model %v", got, model)
				}
				model = model[len(got):]
			case 3:
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				q2, err := Open(Options{DB: db, Mem: 3, Chunk: 2, Disk: 50})
				if err != nil {
					t.Fatal(err)
				}
				q = q2
			}
		}
		if got := drain(q, 4); !cmp.Equal(got, model, cmpopts.EquateEmpty()) {
			t.Fatalf("drain %v, model %v", got, model)
		}
	})
}
