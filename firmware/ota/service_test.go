package ota

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/longop"
	"github.com/holofleet/holofleet/firmware/ota/bootloader"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

// recorder keeps every session published.
type recorder struct {
	mu     sync.Mutex
	states []string
}

func (r *recorder) SetState(kind string, state any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := state.(Session); ok && kind == "ota" {
		if n := len(r.states); n == 0 || r.states[n-1] != s.State {
			r.states = append(r.states, s.State)
		}
	}
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.states...)
}

type env struct {
	t        *testing.T
	dir      string
	svc      *Service
	srv      *httptest.Server
	rec      *recorder
	restarts chan time.Duration
	long     *longop.Lock
}

func testImage(t testing.TB, version, project string, size int) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), size/(len(version)+1)+1)[:size]
	b, err := image.Pack(image.Desc{Version: version, Project: project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newEnv makes a board data dir whose ota_0 holds version 1.0.0,
// confirmed, running, and serves the routes.
func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	fl, err := flash.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bootloader.Choose(bootloader.Config{Flash: fl, Expect: HostExpect(),
		Install: func() ([]byte, error) { return testImage(t, "1.0.0", "holo-board", 5000), nil }})
	if err != nil || c.Slot != 0 || !c.Installed {
		t.Fatalf("install: %+v %v", c, err)
	}
	return startEnv(t, dir, 0)
}

func startEnv(t *testing.T, dir string, running int) *env {
	e := &env{t: t, dir: dir, rec: &recorder{}, restarts: make(chan time.Duration, 8), long: &longop.Lock{}}
	svc, err := New(Config{DataDir: dir, Running: running, Expect: HostExpect(), Events: e.rec, Long: e.long,
		Restart: func(d time.Duration) { e.restarts <- d }})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	mux := http.NewServeMux()
	for _, r := range svc.Routes() {
		mux.Handle(r.Method+" /api/v1"+r.Path, r.Handler)
	}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() { e.srv.Close(); svc.Close() })
	return e
}

type reply struct {
	status int
	body   []byte
}

func (r reply) code() string {
	var e struct{ Error string }
	_ = json.Unmarshal(r.body, &e)
	return e.Error
}

func (r reply) session(t *testing.T) Session {
	t.Helper()
	var s Session
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	return s
}

func (e *env) do(method, path string, body io.Reader, length int64) reply {
	e.t.Helper()
	r, err := e.try(method, path, body, length)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// try is do for goroutines other than the test's: it returns the error.
func (e *env) try(method, path string, body io.Reader, length int64) (reply, error) {
	req, err := http.NewRequest(method, e.srv.URL+"/api/v1"+path, body)
	if err != nil {
		return reply{}, err
	}
	if body != nil {
		req.ContentLength = length
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, b}, nil
}

func (e *env) upload(img []byte, query string) reply {
	return e.do("PUT", "/ota/image"+query, bytes.NewReader(img), int64(len(img)))
}

func (e *env) post(path, body string) reply {
	return e.do("POST", path, strings.NewReader(body), int64(len(body)))
}

func (e *env) record() otadata.Record {
	fl, _ := flash.Open(e.dir)
	p, _ := fl.Open(flash.OTAData)
	defer p.Close()
	r, err := otadata.NewStore(p).Read()
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) status() Status {
	st, err := e.svc.Status()
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func shaHex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// Row: idle -> receiving -> verifying -> staged; boot image unchanged.
func TestUploadStages(t *testing.T) {
	e := newEnv(t)
	img := testImage(t, "2.0.0", "holo-board", 300000)
	before := e.record()
	r := e.upload(img, "?sha256="+shaHex(img))
	s := r.session(t)
	if r.status != 200 || s.State != StateStaged || *s.Slot != "ota_1" || *s.SHA256 != shaHex(img) || s.App.Version != "2.0.0" || s.Bytes != int64(len(img)) || s.BootsNext {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := e.rec.seen(); strings.Join(got, ",") != "receiving,verifying,staged" {
		t.Errorf("events %v", got)
	}
	if after := e.record(); after.Boot() != before.Boot() {
		t.Errorf("boot slot changed by staging: %+v", after)
	}
	st := e.status()
	if st.Slots[1].App == nil || st.Slots[1].App.Version != "2.0.0" || st.Slots[1].State != nil || !st.Slots[1].Next || !st.Slots[0].Running {
		t.Errorf("status %+v", st.Slots)
	}
}

// Rows: receiving -> failed (wrong file); failed -> idle; running untouched.
func TestUploadRefusals(t *testing.T) {
	good := testImage(t, "2.0.0", "holo-board", 4000)
	other := testImage(t, "2.0.0", "other-project", 4000)
	bad := bytes.Clone(good)
	bad[1000] ^= 0xFF
	tests := []struct {
		name   string
		img    []byte
		query  string
		status int
		code   string
	}{
		{"garbage", bytes.Repeat([]byte{0x42}, 5000), "", 422, "invalid_image"},
		{"bootloader-like", append([]byte{0xE9, 0, 0}, make([]byte, 400)...), "", 422, "invalid_image"},
		{"other project", other, "", 422, "invalid_image"},
		{"corrupt", bad, "", 422, "invalid_image"},
		{"truncated", good[:len(good)-10], "", 422, "invalid_image"},
		{"sha mismatch", good, "?sha256=" + strings.Repeat("ab", 32), 422, "sha256_mismatch"},
		{"bad sha", good, "?sha256=xyz", 400, "bad_sha256"},
		{"bad bool", good, "?activate=yes", 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.upload(tt.img, tt.query)
			if r.status != tt.status || r.code() != tt.code {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			if r.status == 422 {
				s := e.svc.Session()
				if s.State != StateFailed || s.Error == nil || !strings.HasPrefix(*s.Error, tt.code) {
					t.Fatalf("session %+v", s)
				}
				if rec := e.record(); rec.Boot() != 0 || rec.States[0] != otadata.Valid {
					t.Fatalf("running firmware touched: %+v", rec)
				}
				d := e.do("DELETE", "/ota/image", nil, 0)
				if d.status != 200 || d.session(t).State != StateIdle {
					t.Fatalf("failed -> idle: %d %s", d.status, d.body)
				}
			}
		})
	}
	e := newEnv(t)
	if r := e.upload(other, "?force=1"); r.status != 200 || r.session(t).State != StateStaged {
		t.Fatalf("force: %d %s", r.status, r.body)
	}
}

func TestUploadLengthRules(t *testing.T) {
	e := newEnv(t)
	// Chunked: no Content-Length.
	r := e.do("PUT", "/ota/image", io.MultiReader(strings.NewReader("x")), -1)
	if r.status != 411 || r.code() != "length_required" {
		t.Fatalf("chunked: %d %s", r.status, r.body)
	}
	// A length over the slot is refused before any byte is read.
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /api/v1/ota/image HTTP/1.1\r\nHost: board\r\nContent-Length: %d\r\n\r\n", flash.SlotSize+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(body), "too_large") {
		t.Fatalf("too large: %d %s", resp.StatusCode, body)
	}
	if s := e.svc.Session(); s.State != StateIdle {
		t.Fatalf("session moved: %+v", s)
	}
}

// Row: receiving -> failed (cancelled) by DELETE; staged -> idle; busy.
func TestCancelAndBusy(t *testing.T) {
	e := newEnv(t)
	img := testImage(t, "2.0.0", "holo-board", 400000)
	pr, pw := io.Pipe()
	type result struct {
		r   reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := e.try("PUT", "/ota/image", pr, int64(len(img)))
		done <- result{r, err}
	}()
	if _, err := pw.Write(img[:100000]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.svc.Session().Bytes >= 100000 })
	if s := e.svc.Session(); s.State != StateReceiving || s.Total != int64(len(img)) {
		t.Fatalf("%+v", s)
	}
	// Another upload while one runs: busy.
	if r := e.upload(img, ""); r.status != 409 || r.code() != "busy" {
		t.Fatalf("second upload: %d %s", r.status, r.body)
	}
	if r := e.post("/ota/activate", `{}`); r.status != 409 {
		t.Fatalf("activate while receiving: %d %s", r.status, r.body)
	}
	d := e.do("DELETE", "/ota/image", nil, 0)
	s := d.session(t)
	if d.status != 200 || s.State != StateFailed || s.Error == nil || *s.Error != "cancelled" {
		t.Fatalf("cancel: %d %s", d.status, d.body)
	}
	// The reply comes while the body is still open: ending the body
	// first would have the client report the short body instead.
	res := <-done
	pw.Close()
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.r
	if r.status != 409 || r.code() != "cancelled" {
		t.Fatalf("cancelled upload reply: %d %s", r.status, r.body)
	}
	if h := e.long.Holder(); h != "" {
		t.Fatalf("long lock still held by %q", h)
	}
	// The lock is free again: a new upload stages; DELETE makes it idle.
	if r := e.upload(img, ""); r.status != 200 {
		t.Fatalf("upload after cancel: %d %s", r.status, r.body)
	}
	d = e.do("DELETE", "/ota/image", nil, 0)
	if d.session(t).State != StateIdle {
		t.Fatalf("staged -> idle: %s", d.body)
	}
	if e.record().Boot() != 0 {
		t.Fatal("boot slot changed")
	}
	// Idle DELETE stays idle.
	if d := e.do("DELETE", "/ota/image", nil, 0); d.status != 200 || d.session(t).State != StateIdle {
		t.Fatalf("idle delete: %s", d.body)
	}
	// Another long operation holds the lock: busy.
	release, _ := e.long.TryAcquire("file upload")
	if r := e.upload(img, ""); r.status != 409 || r.code() != "busy" {
		t.Fatalf("busy: %d %s", r.status, r.body)
	}
	release()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Rows: staged -> active (activate), active DELETE -> 409, undo with the
// running slot and reboot false, activate in the upload.
func TestActivate(t *testing.T) {
	e := newEnv(t)
	if r := e.post("/ota/activate", `{}`); r.status != 409 || r.code() != "nothing_staged" {
		t.Fatalf("nothing staged: %d %s", r.status, r.body)
	}
	if r := e.post("/ota/activate", `{"slot":"ota_7"}`); r.status != 404 || r.code() != "no_such_slot" {
		t.Fatalf("no such slot: %d %s", r.status, r.body)
	}
	if r := e.post("/ota/activate", `{"slot":"ota_1"}`); r.status != 422 || r.code() != "invalid_image" {
		t.Fatalf("empty slot: %d %s", r.status, r.body)
	}
	img := testImage(t, "2.0.0", "holo-board", 10000)
	e.upload(img, "")
	r := e.post("/ota/activate", `{"reboot":false}`)
	var res ActivateResult
	_ = json.Unmarshal(r.body, &res)
	if r.status != 202 || res.Slot != "ota_1" || res.RestartInMS != nil || res.Session.State != StateActive || !res.Session.BootsNext {
		t.Fatalf("activate: %d %s", r.status, r.body)
	}
	if rec := e.record(); rec.Boot() != 1 || rec.States[1] != otadata.New || rec.States[0] != otadata.Valid {
		t.Fatalf("otadata %+v", rec)
	}
	st := e.status()
	if !st.Slots[1].Boots || st.Slots[0].Boots || *st.Slots[1].State != "trial" {
		t.Fatalf("status %+v", st.Slots)
	}
	if d := e.do("DELETE", "/ota/image", nil, 0); d.status != 409 || d.code() != "cannot_discard" {
		t.Fatalf("active delete: %d %s", d.status, d.body)
	}
	if r := e.upload(img, ""); r.status != 409 {
		t.Fatalf("upload over the activated image: %d %s", r.status, r.body)
	}
	// Undo: activate the running slot without reboot.
	r = e.post("/ota/activate", `{"slot":"ota_0","reboot":false}`)
	_ = json.Unmarshal(r.body, &res)
	if r.status != 202 || res.Session.State != StateStaged || res.Session.BootsNext {
		t.Fatalf("undo: %d %s", r.status, r.body)
	}
	if rec := e.record(); rec.Boot() != 0 {
		t.Fatalf("undo left boot %d", rec.Boot())
	}
	// Activate again with reboot: a restart a second later.
	r = e.post("/ota/activate", `{}`)
	_ = json.Unmarshal(r.body, &res)
	if r.status != 202 || res.RestartInMS == nil || *res.RestartInMS != 1000 {
		t.Fatalf("activate reboot: %d %s", r.status, r.body)
	}
	if d := <-e.restarts; d != time.Second {
		t.Fatalf("restart delay %v", d)
	}
}

func TestUploadActivateReboot(t *testing.T) {
	e := newEnv(t)
	img := testImage(t, "2.0.0", "holo-board", 10000)
	r := e.upload(img, "?activate=1&reboot=1")
	if r.status != 200 || r.session(t).State != StateActive {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// "A moment after replying": UpdateRestartDelay, not activate's second.
	if d := <-e.restarts; d != 200*time.Millisecond {
		t.Fatalf("restart %v", d)
	}
	// reboot alone does nothing beyond staging.
	e2 := newEnv(t)
	if r := e2.upload(img, "?reboot=true"); r.session(t).State != StateStaged || len(e2.restarts) != 0 {
		t.Fatalf("reboot alone: %s", r.body)
	}
}

// The trial and rollback rules through the bootloader: active -> restart
// -> trial -> confirmed; a reset before confirmation boots the previous
// image and records the slot rolled back; activating it is refused.
func TestTrialConfirmAndRollback(t *testing.T) {
	for _, confirm := range []bool{true, false} {
		t.Run(fmt.Sprint("confirm=", confirm), func(t *testing.T) {
			e := newEnv(t)
			e.upload(testImage(t, "2.0.0", "holo-board", 10000), "?activate=1&reboot=0")
			fl, _ := flash.Open(e.dir)
			c, err := bootloader.Choose(bootloader.Config{Flash: fl, Expect: HostExpect()})
			if err != nil || c.Slot != 1 || !c.Trial {
				t.Fatalf("boot: %+v %v", c, err)
			}
			if confirm {
				if ok, err := bootloader.Confirm(fl, 1); !ok || err != nil {
					t.Fatalf("confirm %v %v", ok, err)
				}
			}
			c, err = bootloader.Choose(bootloader.Config{Flash: fl, Expect: HostExpect()})
			if err != nil {
				t.Fatal(err)
			}
			if confirm {
				if c.Slot != 1 || c.Trial || c.RolledBack != "" {
					t.Fatalf("after confirm: %+v", c)
				}
				e2 := startEnv(t, e.dir, 1)
				st := e2.status()
				if !st.Rollback || *st.Slots[1].State != "confirmed" || !st.Slots[1].Running || st.Slots[1].App.Version != "2.0.0" {
					t.Fatalf("status %+v", st)
				}
				// Going back to the previous firmware.
				r := e2.post("/ota/activate", `{"slot":"ota_0","reboot":false}`)
				if r.status != 202 || !strings.Contains(string(r.body), `"source":"activate"`) {
					t.Fatalf("back: %d %s", r.status, r.body)
				}
				if rec := e2.record(); rec.Boot() != 0 || rec.States != [2]otadata.State{otadata.Valid, otadata.Valid} {
					t.Fatalf("record %+v", rec)
				}
				return
			}
			if c.Slot != 0 || c.RolledBack != "ota_1" {
				t.Fatalf("rollback: %+v", c)
			}
			e2 := startEnv(t, e.dir, 0)
			st := e2.status()
			if st.Rollback || *st.Slots[1].State != "rolled_back" || !st.Slots[0].Boots {
				t.Fatalf("status %+v", st)
			}
			if r := e2.post("/ota/activate", `{"slot":"ota_1"}`); r.status != 422 || r.code() != "invalid_image" {
				t.Fatalf("rolled back slot: %d %s", r.status, r.body)
			}
		})
	}
}

// A staged image changed in flash is refused at activation and its
// session fails.
func TestActivateRechecks(t *testing.T) {
	e := newEnv(t)
	e.upload(testImage(t, "2.0.0", "holo-board", 10000), "")
	fl, _ := flash.Open(e.dir)
	p, _ := fl.Open("ota_1")
	_, _ = p.WriteAt([]byte{0xAA}, 5000)
	p.Close()
	if r := e.post("/ota/activate", `{}`); r.status != 422 || r.code() != "invalid_image" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if s := e.svc.Session(); s.State != StateFailed {
		t.Fatalf("%+v", s)
	}
	if e.record().Boot() != 0 {
		t.Fatal("boot changed")
	}
}

// A refused upload leaves the previous firmware in its slot, rollback
// still possible (the bytes went to the slot's staging file); a good one
// replaces it and clears its record: no rollback to an overwritten slot.
func TestUploadClearsOldRecord(t *testing.T) {
	e := newEnv(t)
	e.upload(testImage(t, "2.0.0", "holo-board", 10000), "?activate=1&reboot=0")
	fl, _ := flash.Open(e.dir)
	if _, err := bootloader.Choose(bootloader.Config{Flash: fl, Expect: HostExpect()}); err != nil {
		t.Fatal(err)
	}
	_, _ = bootloader.Confirm(fl, 1)
	e2 := startEnv(t, e.dir, 1)
	if !e2.status().Rollback {
		t.Fatal("rollback expected before the upload")
	}
	e2.upload([]byte("junk that is not an image at all, long enough to pass the first check size........"+strings.Repeat("x", 300)), "")
	st := e2.status()
	if !st.Rollback || st.Slots[0].State == nil || *st.Slots[0].State != "confirmed" || st.Slots[0].App == nil || st.Slots[0].App.Version != "1.0.0" {
		t.Fatalf("after a failed upload over ota_0: %+v", st)
	}
	e2.upload(testImage(t, "3.0.0", "holo-board", 10000), "")
	st = e2.status()
	if st.Rollback || st.Slots[0].State != nil || st.Slots[0].App == nil || st.Slots[0].App.Version != "3.0.0" {
		t.Fatalf("after a good upload over ota_0: %+v", st)
	}
}
