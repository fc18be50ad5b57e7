package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

// openEvents opens GET /events as an SSE stream with the extra request
// options and returns the status and the error code of a refusal; an open
// stream stays open until the test ends.
func openEvents(t *testing.T, b *boardtest.Board, opts ...boardtest.Option) (status int, code string) {
	t.Helper()
	req, err := http.NewRequest("GET", b.URL+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for _, o := range opts {
		o(req)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error
	}
	t.Cleanup(func() { resp.Body.Close() })
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "retry: 3000\n" {
		t.Fatalf("stream began %q (%v)", line, err)
	}
	return 200, ""
}

// TestEventStreamKeptForPassword: with a password set, strangers get two
// of the three event streams; the third is kept for a client that sends
// the password, as the gateway does. Without a password all three are
// anyone's.
func TestEventStreamKeptForPassword(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	bearer := boardtest.Header("Authorization", "Bearer s3cret")
	expect(t, b.Do("PATCH", "/web", `{"password":"s3cret"}`), 200, "")
	for i := range 2 {
		if st, code := openEvents(t, b); st != 200 {
			t.Fatalf("stranger %d: %d %s", i+1, st, code)
		}
	}
	if st, code := openEvents(t, b); st != 503 || code != "busy" {
		t.Fatalf("a third stranger: %d %s, want 503 busy", st, code)
	}
	if st, code := openEvents(t, b, boardtest.Header("Authorization", "Bearer guess")); st != 503 || code != "busy" {
		t.Fatalf("a wrong password: %d %s, want 503 busy", st, code)
	}
	if st, code := openEvents(t, b, bearer); st != 200 {
		t.Fatalf("the gateway, with the password: %d %s", st, code)
	}

	c := boardtest.Start(t, "")
	for i := range 3 {
		if st, code := openEvents(t, c); st != 200 {
			t.Fatalf("without a password, stream %d: %d %s", i+1, st, code)
		}
	}
}

// TestPasswordGuessing: five wrong passwords in a row from one address
// are answered 401; then the address must wait (429 with Retry-After)
// before the board checks a password again, even the right one.
func TestPasswordGuessing(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	expect(t, b.Do("PATCH", "/web", `{"password":"s3cret"}`), 200, "")
	wrong := boardtest.Header("Authorization", "Bearer guess")
	bearer := boardtest.Header("Authorization", "Bearer s3cret")
	for range 5 {
		expect(t, b.Do("PATCH", "/settings", `{}`, wrong), 401, "auth_required")
	}
	r := b.Do("PATCH", "/settings", `{}`, bearer)
	expect(t, r, 429, "too_many_attempts")
	if r.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q, want 1", r.Header.Get("Retry-After"))
	}
	expect(t, b.Do("GET", "/settings", nil), 200, "") // reading needs no password
	// A client waits for the lock to end; while it lasts the right
	// password keeps getting 429 (and, not being checked, does not count).
	boardtest.WaitFor(t, 30*time.Second, "the lock to end", func() bool {
		r := b.Do("PATCH", "/settings", `{}`, bearer)
		if r.Status == 429 {
			return false
		}
		expect(t, r, 200, "")
		return true
	})
	expect(t, b.Do("PATCH", "/settings", `{}`, wrong), 401, "auth_required") // the count starts again
}
