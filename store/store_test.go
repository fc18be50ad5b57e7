package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type doc struct {
	N    int    `json:"n"`
	Pad  string `json:"pad"`
	Half int    `json:"half"`
}

func open(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Error(err)
		}
		db.Close()
	})
	return db
}

func TestBucketCRUD(t *testing.T) {
	db := open(t)
	b := db.Bucket("settings")
	var got doc
	if ok, err := b.Get("x", &got); ok || err != nil {
		t.Fatalf("missing key: ok=%v err=%v", ok, err)
	}
	want := doc{N: 3, Pad: "a"}
	if err := b.Put("x", want); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Get("x", &got); !ok || err != nil {
		t.Fatalf("get: ok=%v err=%v", ok, err)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	if err := b.Batch(map[string]any{"y": doc{N: 4}, "x": nil}); err != nil {
		t.Fatal(err)
	}
	keys, err := b.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(keys, []string{"y"}); diff != "" {
		t.Errorf("keys (-got +want)\n%s", diff)
	}
	if err := b.Clear(); err != nil {
		t.Fatal(err)
	}
	if keys, _ := b.Keys(); len(keys) != 0 {
		t.Fatalf("after Clear: %v", keys)
	}
}

func TestLockedByAnotherHandle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Open(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestClosed(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := db.Bucket("b").Put("k", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
}

// TestMain lets the crash test re-run this binary as a writer process.
func TestMain(m *testing.M) {
	if path := os.Getenv("HOLO_STORE_CRASH_WRITER"); path != "" {
		crashWriter(path)
		return
	}
	os.Exit(m.Run())
}

// crashWriter writes documents whose two halves must agree, forever,
// printing each committed number so the parent knows progress.
func crashWriter(path string) {
	db, err := Open(path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	b := db.Bucket("settings")
	pad := string(make([]byte, 3000))
	for n := 1; ; n++ {
		d := doc{N: n, Pad: pad, Half: n}
		if err := b.Batch(map[string]any{"a": d, "b": d}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(n)
	}
}

// TestKillMidWrite kills a writing process with SIGKILL at several moments
// and checks that the file reopens, passes bbolt's check, and holds a
// consistent document at least as new as the last acknowledged write.
func TestKillMidWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	for round := range 5 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "HOLO_STORE_CRASH_WRITER="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		last := 0
		target := 20 + round*37
		for sc.Scan() {
			n, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("writer: %s", sc.Text())
			}
			last = n
			if n >= target {
				break
			}
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		db, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if err := db.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var a, b doc
		okA, errA := db.Bucket("settings").Get("a", &a)
		okB, errB := db.Bucket("settings").Get("b", &b)
		db.Close()
		if !okA || !okB || errA != nil || errB != nil {
			t.Fatalf("round %d: documents missing: %v %v", round, errA, errB)
		}
		if a.N != a.Half || a.N != b.N {
			t.Fatalf("round %d: torn state a=%d/%d b=%d", round, a.N, a.Half, b.N)
		}
		if a.N < last {
			t.Fatalf("round %d: acknowledged write %d lost (found %d)", round, last, a.N)
		}
	}
}

func TestScanDeleteFirstLen(t *testing.T) {
	db := open(t)
	b := db.Bucket("log")
	if n, err := b.Len(); n != 0 || err != nil {
		t.Fatalf("empty Len %d %v", n, err)
	}
	if err := b.Scan("", "", false, func(string, []byte) (bool, error) { t.Error("scan of a missing bucket"); return true, nil }); err != nil {
		t.Fatal(err)
	}
	puts := map[string]any{}
	for i := range 10 {
		puts[fmt.Sprintf("k%02d", i)] = doc{N: i}
	}
	if err := b.Batch(puts); err != nil {
		t.Fatal(err)
	}
	scan := func(from, to string, reverse bool, max int) []string {
		t.Helper()
		var keys []string
		err := b.Scan(from, to, reverse, func(k string, raw []byte) (bool, error) {
			var d doc
			if err := json.Unmarshal(raw, &d); err != nil || fmt.Sprintf("k%02d", d.N) != k {
				t.Errorf("%s: %s %v", k, raw, err)
			}
			keys = append(keys, k)
			return len(keys) < max, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	for _, tc := range []struct {
		from, to string
		reverse  bool
		max      int
		want     []string
	}{
		{"", "", false, 3, []string{"k00", "k01", "k02"}},
		{"", "", true, 3, []string{"k09", "k08", "k07"}},
		{"k03", "k06", false, 99, []string{"k03", "k04", "k05"}},
		{"k03", "k06", true, 99, []string{"k05", "k04", "k03"}},
		{"k03x", "k05x", true, 99, []string{"k05", "k04"}},
		{"k08", "zz", true, 99, []string{"k09", "k08"}},
		{"", "a", true, 99, nil},
		{"zz", "", false, 99, nil},
	} {
		if diff := cmp.Diff(scan(tc.from, tc.to, tc.reverse, tc.max), tc.want); diff != "" {
			t.Errorf("Scan(%q, %q, %v) (-got +want):\n%s", tc.from, tc.to, tc.reverse, diff)
		}
	}
	stop := errors.New("stop")
	if err := b.Scan("", "", false, func(string, []byte) (bool, error) { return true, stop }); !errors.Is(err, stop) {
		t.Errorf("Scan error: %v", err)
	}
	if n, err := b.DeleteFirst(3, "k02"); n != 2 || err != nil {
		t.Errorf("DeleteFirst before k02: %d %v", n, err)
	}
	if n, err := b.DeleteFirst(3, ""); n != 3 || err != nil {
		t.Errorf("DeleteFirst 3: %d %v", n, err)
	}
	if n, err := b.Len(); n != 5 || err != nil {
		t.Errorf("Len %d %v", n, err)
	}
	if diff := cmp.Diff(scan("", "", false, 99), []string{"k05", "k06", "k07", "k08", "k09"}); diff != "" {
		t.Errorf("left (-got +want):\n%s", diff)
	}
	if n, err := db.Bucket("none").DeleteFirst(3, ""); n != 0 || err != nil {
		t.Errorf("DeleteFirst of a missing bucket: %d %v", n, err)
	}
}

// Each is how components load their records: every document in key
// order, decoded; a bad document or fn's error stops it, and fn may write
// to the store (it runs outside the read).
func TestEach(t *testing.T) {
	db := open(t)
	b := db.Bucket("each")
	calls := 0
	if err := Each(b, func(string, doc) error { calls++; return nil }); err != nil || calls != 0 {
		t.Fatalf("bucket never written: %d calls, %v", calls, err)
	}
	for _, n := range []int{3, 1, 2} {
		if err := b.Put("k"+strconv.Itoa(n), doc{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := Each(b, func(k string, d doc) error {
		got = append(got, fmt.Sprintf("%s=%d", k, d.N))
		return b.Put("seen-"+k, d) // a write from fn does not wait on the read
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"k1=1", "k2=2", "k3=3"}, got); diff != "" {
		t.Fatalf("order or values (-want +got):\n%s", diff)
	}

	stop := errors.New("stop")
	calls = 0
	if err := Each(b, func(string, doc) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: %d calls, %v", calls, err)
	}

	if err := b.Put("k0", "not a doc"); err != nil {
		t.Fatal(err)
	}
	calls = 0
	err = Each(b, func(string, doc) error { calls++; return nil })
	if err == nil || !strings.Contains(err.Error(), "each/k0") || calls != 0 {
		t.Fatalf("bad document: %d calls, %v (want an error naming each/k0 before any call)", calls, err)
	}
}
