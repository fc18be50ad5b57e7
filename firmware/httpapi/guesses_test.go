package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

func guardedServer(clk clock.Clock, maxTracked int) *Server {
	s := New(access{pw: "pw"}, Options{Clock: clk, MaxTracked: maxTracked})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteJSON(w, 200, map[string]bool{"trusted": Trusted(r)})
	})
	s.Handle(api.Route{Method: "GET", Path: "/thing", Handler: ok}, api.Route{Method: "PATCH", Path: "/thing", Handler: ok})
	return s
}

// try sends a request from remote with the password pw ("" for none) and
// returns "status code retry-after".
func try(s *Server, method, remote, pw string) string {
	r := httptest.NewRequest(method, "/api/v1/thing", strings.NewReader("{}"))
	r.Host = "1.2.3.4"
	r.RemoteAddr = remote
	r.Header.Set("Content-Type", "application/json")
	if pw != "" {
		r.Header.Set("Authorization", "Bearer "+pw)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	code := "ok"
	if w.Code != 200 {
		code = strings.SplitN(strings.TrimPrefix(w.Body.String(), `{"error":"`), `"`, 2)[0]
	} else if strings.Contains(w.Body.String(), `"trusted":true`) {
		code = "trusted"
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s %s", w.Code, code, w.Header().Get("Retry-After")))
}

func TestLockFor(t *testing.T) {
	var got []time.Duration
	for n := FreeFailures; n <= FreeFailures+8; n++ {
		got = append(got, lockFor(n))
	}
	s := time.Second
	want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, time.Minute, time.Minute, time.Minute}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("locks (-got +want)\n%s", diff)
	}
}

// TestGuessing: five wrong passwords are answered at once; then the
// address is locked (429 with Retry-After, the password not checked) for
// a time that doubles with each further failure; the right password after
// a lock resets the count. Other addresses are not affected, and open
// reads without a password are served throughout.
func TestGuessing(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	s := guardedServer(clk, 0)
	const a, b = "192.0.2.7:5000", "192.0.2.8:5000"
	var got []string
	step := func(what string) { got = append(got, what) }
	for range FreeFailures {
		step(try(s, "PATCH", a, "guess"))
	}
	step(try(s, "PATCH", a, "pw"))                // locked: even the right one waits
	step(try(s, "GET", a, "guess"))               // a password on an open read is checked too
	step(try(s, "GET", a, ""))                    // an open read without one is served
	step(try(s, "PATCH", "192.0.2.7:6001", "pw")) // the same address from another port
	step(try(s, "PATCH", b, "pw"))                // another address is not locked
	clk.Advance(time.Second)
	step(try(s, "PATCH", a, "guess")) // sixth failure: 2 s
	step(try(s, "PATCH", a, "guess"))
	clk.Advance(1500 * time.Millisecond)
	step(try(s, "PATCH", a, "guess")) // 0.5 s left, rounded up
	clk.Advance(500 * time.Millisecond)
	step(try(s, "PATCH", a, "pw")) // the right one: forgiven
	step(try(s, "PATCH", a, "guess"))
	step(try(s, "PATCH", a, "pw"))
	want := []string{
		"401 auth_required", "401 auth_required", "401 auth_required", "401 auth_required", "401 auth_required",
		"429 too_many_attempts 1",
		"429 too_many_attempts 1",
		"200 ok",
		"429 too_many_attempts 1",
		"200 trusted",
		"401 auth_required",
		"429 too_many_attempts 2",
		"429 too_many_attempts 1",
		"200 trusted",
		"401 auth_required",
		"200 trusted",
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("replies (-got +want)\n%s", diff)
	}
}

// TestGuessingGrowsToCap: a patient guesser gets one try per lock, the
// lock doubling up to MaxLock; after ForgetAfter without a failure the
// address starts afresh.
func TestGuessingGrowsToCap(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	s := guardedServer(clk, 0)
	const a = "[2001:db8:1:2::10]:443"
	for range FreeFailures {
		try(s, "PATCH", a, "guess")
	}
	var locks []string
	for range 8 {
		r := try(s, "PATCH", a, "guess")
		locks = append(locks, strings.TrimPrefix(r, "429 too_many_attempts "))
		left := s.guesses.locked(addressKey(a))
		clk.Advance(left)
		if r := try(s, "PATCH", a, "guess"); r != "401 auth_required" {
			t.Fatalf("after the lock: %s", r)
		}
	}
	want := []string{"1", "2", "4", "8", "16", "32", "60", "60"}
	if diff := cmp.Diff(locks, want); diff != "" {
		t.Errorf("Retry-After values (-got +want)\n%s", diff)
	}
	// Another host of the same /64 shares the lock; another /64 does not.
	if r := try(s, "PATCH", "[2001:db8:1:2::99]:80", "pw"); r != "429 too_many_attempts 60" {
		t.Errorf("same /64: %s", r)
	}
	if r := try(s, "PATCH", "[2001:db8:1:3::10]:80", "pw"); r != "200 trusted" {
		t.Errorf("other /64: %s", r)
	}
	clk.Advance(ForgetAfter)
	for range FreeFailures {
		if r := try(s, "PATCH", a, "guess"); r != "401 auth_required" {
			t.Fatalf("after ForgetAfter: %s", r)
		}
	}
}

// TestGuessingMemoryBounded: however many addresses guess, at most
// MaxTracked are remembered; the least recently failing go first.
func TestGuessingMemoryBounded(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	s := guardedServer(clk, 4)
	const locked = "198.51.100.1:1"
	for range FreeFailures {
		try(s, "PATCH", locked, "guess")
	}
	for i := range 1000 {
		try(s, "PATCH", fmt.Sprintf("203.0.113.%d:%d", i%250, i), "guess")
		if n := s.guesses.tracked(); n > 4 {
			t.Fatalf("%d addresses remembered", n)
		}
	}
	if r := try(s, "PATCH", locked, "pw"); r != "200 trusted" {
		t.Errorf("the evicted address: %s", r)
	}
}

func TestTrustedMark(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	open := New(access{}, Options{Clock: clk})
	open.Handle(api.Route{Method: "GET", Path: "/thing", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteJSON(w, 200, map[string]bool{"trusted": Trusted(r)})
	})})
	guarded := guardedServer(clk, 0)
	for _, tc := range []struct {
		s    *Server
		pw   string
		want string
	}{
		{open, "", "200 trusted"},
		{open, "anything", "200 trusted"},
		{guarded, "", "200 ok"},
		{guarded, "wrong", "200 ok"},
		{guarded, "pw", "200 trusted"},
	} {
		if got := try(tc.s, "GET", "192.0.2.1:1", tc.pw); got != tc.want {
			t.Errorf("password %q: %s, want %s", tc.pw, got, tc.want)
		}
	}
	if Trusted(httptest.NewRequest("GET", "/", nil)) {
		t.Error("a request that did not pass a Server is trusted")
	}
}
