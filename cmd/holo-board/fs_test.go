package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

var octet = boardtest.Header("Content-Type", "application/octet-stream")

// upload PUTs data to path with the query q ("" for none).
func upload(b *boardtest.Board, path, q string, data []byte) boardtest.Reply {
	if q != "" {
		q = "&" + q
	}
	return b.Do("PUT", "/fs/file?path="+url.QueryEscape(path)+q, data, octet)
}

// rawDo sends raw bytes and returns the reply (validated against
// openapi.json like every other request).
func rawDo(t *testing.T, b *boardtest.Board, method, path string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	var payload any
	if body != nil {
		payload = body
	}
	r := b.Do(method, path, payload, boardtest.Header("Content-Type", "application/octet-stream"))
	return r.Status, r.Header, r.Body
}

func expect(t *testing.T, r boardtest.Reply, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("got %d %s, want %d %q", r.Status, r.Body, status, code)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	vol := b.Do("GET", "/fs", nil).Map(t)
	if vol["root"] != "/" || vol["total"] != float64(12<<20) || vol["used"] != float64(0) {
		t.Fatalf("GET /fs: %v", vol)
	}
	if f := b.Do("GET", "/info", nil).Map(t)["features"]; !strings.Contains(fmt.Sprint(f), "files") {
		t.Errorf("features %v lack files", f)
	}

	data := bytes.Repeat([]byte("holofleet "), 1000)
	sum := sha256.Sum256(data)
	r := upload(b, "/clips/a.bin", "parents=1&sha256="+hex.EncodeToString(sum[:]), data)
	expect(t, r, 201, "")
	e := r.Map(t)
	if e["name"] != "a.bin" || e["path"] != "/clips/a.bin" || e["type"] != "file" || e["size"] != float64(len(data)) {
		t.Fatalf("created entry %v", e)
	}
	if _, err := time.Parse(time.RFC3339, e["mtime"].(string)); err != nil || !strings.HasSuffix(e["mtime"].(string), "Z") {
		t.Errorf("mtime %v", e["mtime"])
	}
	expect(t, upload(b, "/clips/a.bin", "", data), 409, "exists")
	if status, _, body := rawDo(t, b, "PUT", "/fs/file?path=/clips/a.bin&overwrite=true", data); status != 200 {
		t.Fatalf("replace: %d %s", status, body)
	}

	l := b.Do("GET", "/fs/list", nil).Map(t)
	if l["path"] != "/" || len(l["entries"].([]any)) != 1 {
		t.Errorf("list of / by default: %v", l)
	}
	if ent := b.Do("GET", "/fs/list?path=/clips", nil).Map(t)["entries"].([]any); len(ent) != 1 || ent[0].(map[string]any)["name"] != "a.bin" {
		t.Errorf("list /clips: %v", ent)
	}
	if got := b.Do("GET", "/fs/entry?path=/clips/a.bin&sha256=true", nil).Map(t)["sha256"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 %v", got)
	}
	if _, ok := b.Do("GET", "/fs/entry?path=/clips/a.bin", nil).Map(t)["sha256"]; ok {
		t.Error("sha256 given unasked")
	}
	d := b.Do("GET", "/fs/file?path=/clips/a.bin", nil)
	if d.Status != 200 || !bytes.Equal(d.Body, data) || d.Header.Get("Content-Type") != "application/octet-stream" ||
		d.Header.Get("Content-Disposition") != "attachment; filename=a.bin" {
		t.Fatalf("download: %d %v", d.Status, d.Header)
	}

	expect(t, b.Do("POST", "/fs/mkdir", map[string]any{"path": "/deep/er"}), 404, "not_found")
	expect(t, b.Do("POST", "/fs/mkdir", map[string]any{"path": "/deep/er", "parents": true}), 201, "")
	expect(t, b.Do("POST", "/fs/mkdir", map[string]any{"path": "/deep"}), 409, "exists")
	expect(t, b.Do("POST", "/fs/copy", map[string]any{"from": "/clips/a.bin", "to": "/deep/b.bin"}), 201, "")
	expect(t, b.Do("POST", "/fs/copy", map[string]any{"from": "/clips/a.bin", "to": "/deep/b.bin"}), 409, "exists")
	expect(t, b.Do("POST", "/fs/copy", map[string]any{"from": "/deep", "to": "/d2"}), 400, "is_a_directory")
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/clips/a.bin", "to": "/deep/b.bin"}), 409, "exists")
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/clips/a.bin", "to": "/deep", "overwrite": true}), 409, "exists")
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/clips/a.bin", "to": "/deep/b.bin", "overwrite": true}), 200, "")
	r = b.Do("POST", "/fs/move", map[string]any{"from": "/deep", "to": "/clips/deep"})
	expect(t, r, 200, "")
	if r.Map(t)["type"] != "dir" {
		t.Errorf("moved dir: %s", r.Body)
	}
	expect(t, b.Do("GET", "/fs/entry?path=/clips/deep/b.bin", nil), 200, "")
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/nope", "to": "/x"}), 404, "not_found")

	expect(t, b.Do("DELETE", "/fs/entry?path=/clips", nil), 409, "not_empty")
	expect(t, b.Do("DELETE", "/fs/entry?path=/", nil), 400, "bad_path")
	expect(t, b.Do("DELETE", "/fs/entry?path=/clips&recursive=true", nil), 204, "")
	expect(t, b.Do("GET", "/fs/entry?path=/clips", nil), 404, "not_found")
	if used := b.Do("GET", "/fs", nil).Map(t)["used"]; used != float64(0) {
		t.Errorf("used %v after deleting everything", used)
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "", "--volume-size", fmt.Sprint(256<<10))
	expect(t, upload(b, "/f.txt", "", []byte("text")), 201, "")
	for _, p := range []string{"", "rel", "/a/../f.txt", "/./f.txt", "//f.txt", "/dir/", "/x.part",
		"/" + strings.Repeat("n", 64), "/" + strings.Repeat("abcdefg/", 20)} {
		t.Run("path "+p, func(t *testing.T) {
			expect(t, b.Do("GET", "/fs/entry?path="+url.QueryEscape(p), nil), 400, "bad_path")
			expect(t, upload(b, p, "", []byte("x")), 400, "bad_path")
		})
	}
	expect(t, b.Do("GET", "/fs/list?path=/f.txt", nil), 400, "not_a_directory")
	expect(t, b.Do("GET", "/fs/list?path=/none", nil), 404, "not_found")
	expect(t, b.Do("GET", "/fs/file?path=/", nil), 400, "is_a_directory")
	expect(t, b.Do("GET", "/fs/file?path=/none", nil), 404, "not_found")
	expect(t, upload(b, "/", "overwrite=1", []byte("x")), 400, "is_a_directory")
	expect(t, upload(b, "/f.txt/g", "parents=1", []byte("x")), 400, "not_a_directory")
	expect(t, upload(b, "/no/dir.txt", "", []byte("x")), 404, "not_found")
	expect(t, upload(b, "/f.txt", "overwrite=maybe", []byte("x")), 400, "bad_request")
	expect(t, upload(b, "/g.txt", "sha256=abc", []byte("x")), 400, "bad_sha256")
	expect(t, upload(b, "/g.txt", "sha256="+strings.Repeat("0", 64), []byte("x")), 422, "sha256_mismatch")
	expect(t, b.Do("GET", "/fs/entry?path=/g.txt", nil), 404, "not_found")
	chunked := func(r *http.Request) { r.ContentLength = -1 }
	expect(t, b.Do("PUT", "/fs/file?path=/g.txt", []byte("x"), octet, chunked), 411, "length_required")
	// 256 KiB less the 32 KiB margin and the 4 KiB of f.txt.
	expect(t, upload(b, "/big", "", make([]byte, 256<<10-32<<10-4<<10+1)), 507, "no_space")
	expect(t, upload(b, "/big", "", make([]byte, 256<<10-32<<10-4<<10)), 201, "")
	expect(t, b.Do("POST", "/fs/copy", map[string]any{"from": "/f.txt", "to": "/f2.txt"}), 507, "no_space")
	expect(t, b.Do("POST", "/fs/mkdir", map[string]any{"path": "/d"}), 507, "no_space")
	if free := b.Do("GET", "/fs", nil).Map(t)["free"]; free != float64(32<<10) {
		t.Errorf("free %v", free)
	}
	status, hdr, body := rawDo(t, b, "GET", "/fs/file?path=/f.txt", nil)
	if status != 200 || string(body) != "text" || hdr.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("text download: %d %v %q", status, hdr, body)
	}
}

func TestMediaEndpoints(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	dirs := []string{"../../firmware/media/testdata", "../../../shared/media"}
	if _, err := os.Stat(dirs[1]); err != nil {
		t.Fatalf("shared media absent: %v (the suite reads them from ../shared/media beside the repository)", err)
	}
	for _, dir := range dirs {
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, n := range names {
			data, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, upload(b, "/m/"+filepath.Base(n), "parents=true", data), 201, "")
		}
	}
	info := func(p string) map[string]any {
		r := b.Do("GET", "/media/info?path="+p, nil)
		expect(t, r, 200, "")
		return r.Map(t)
	}
	if m := info("/m/clip-48x32-422-2997-moovfirst-co64.mov"); m["kind"] != "clip" || m["frames"] != float64(5) || m["fps"] != 29.97 || m["width"] != float64(48) {
		t.Errorf("clip info %v", m)
	}
	if m := info("/m/anim-32x24.gif"); m["kind"] != "animation" || m["frames"] != float64(3) {
		t.Errorf("gif info %v", m)
	}
	expect(t, b.Do("GET", "/media/info?path=/m/refused-mjpb.mov", nil), 422, "not_playable")
	expect(t, b.Do("GET", "/media/info?path=/m/refused-text.txt", nil), 422, "not_playable")
	expect(t, b.Do("GET", "/media/info?path=/m", nil), 400, "is_a_directory")
	expect(t, b.Do("GET", "/media/info?path=/m/none.mov", nil), 404, "not_found")
	expect(t, b.Do("GET", "/media/info?path=/m/../x", nil), 400, "bad_path")
	m := info("/m/clip-240-30fps.mov")
	if m["frames"] != float64(60) || m["fps"] != float64(30) || m["width"] != float64(240) {
		t.Errorf("shared clip %v", m)
	}
	for _, f := range []string{"too-large-320x240.mov", "not-mjpeg-mpeg4.mov", "image-progressive.jpg"} {
		expect(t, b.Do("GET", "/media/info?path=/m/"+f, nil), 422, "not_playable")
	}
	var l struct {
		Path    string `json:"path"`
		Entries []struct {
			Path     string `json:"path"`
			Kind     string `json:"kind"`
			Playable bool   `json:"playable"`
			Reason   string `json:"reason"`
		} `json:"entries"`
	}
	b.Do("GET", "/media", nil).JSON(t, &l)
	byPath := map[string]bool{}
	for _, e := range l.Entries {
		byPath[e.Path] = e.Playable
		if !e.Playable && e.Reason == "" {
			t.Errorf("%s refused without a reason", e.Path)
		}
	}
	if !byPath["/m/clip-16x16-420.mov"] || byPath["/m/refused-241x240.mov"] {
		t.Errorf("media list %+v", l)
	}
	if _, listed := byPath["/m/refused-text.txt"]; listed {
		t.Error("a .txt file listed as media")
	}
	expect(t, b.Do("GET", "/media?path=/m/anim-32x24.gif", nil), 400, "not_a_directory")
}

// slowUpload starts a PUT of size bytes whose body the test feeds through
// the returned pipe writer; the reply (or error) arrives on done.
func slowUpload(t *testing.T, b *boardtest.Board, path string, size int) (*io.PipeWriter, chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("PUT", b.URL+"/api/v1/fs/file?overwrite=true&path="+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(size)
	req.Header.Set("Content-Type", "application/octet-stream")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	return pw, done
}

// TestUploadKilledMidway cuts the power during an upload: after the
// restart no partial file remains and the old file is intact. While the
// upload runs, other long operations are refused with busy.
func TestUploadKilledMidway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := boardtest.Start(t, dir)
	old := []byte("the old file")
	expect(t, upload(b, "/clip.bin", "", old), 201, "")
	expect(t, upload(b, "/other", "", []byte("o")), 201, "")

	pw, done := slowUpload(t, b, "/clip.bin", 1<<20)
	if _, err := pw.Write(bytes.Repeat([]byte{7}, 64<<10)); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "storage", "clip.bin.part")
	boardtest.WaitFor(t, 30*time.Second, "the .part file", func() bool {
		st, err := os.Stat(part)
		return err == nil && st.Size() > 0
	})
	expect(t, b.Do("GET", "/fs/entry?path=/other&sha256=true", nil), 409, "busy")
	expect(t, b.Do("GET", "/fs/file?path=/other", nil), 409, "busy")
	expect(t, b.Do("POST", "/fs/copy", map[string]any{"from": "/other", "to": "/o2"}), 409, "busy")
	expect(t, upload(b, "/o3", "", []byte("x")), 409, "busy")
	expect(t, b.Do("GET", "/fs/entry?path=/other", nil), 200, "")
	if ent := b.Do("GET", "/fs/list", nil).Map(t)["entries"].([]any); len(ent) != 2 {
		t.Errorf("listing during upload shows %d entries: %v", len(ent), ent)
	}

	b.Kill()
	pw.CloseWithError(io.ErrClosedPipe)
	<-done
	if _, err := os.Stat(part); err != nil {
		t.Fatalf("the kill left no .part file to clean up (%v); the test proves nothing", err)
	}
	b = boardtest.Start(t, dir)
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Errorf(".part file still there after restart: %v", err)
	}
	if d := b.Do("GET", "/fs/file?path=/clip.bin", nil); d.Status != 200 || !bytes.Equal(d.Body, old) {
		t.Errorf("old file after restart: %d %q", d.Status, d.Body)
	}

	// A cut-off upload on a running board also leaves the old file. The
	// cut comes once the board runs the upload (it holds the lock of
	// long operations): cut before, the board could take the request's
	// head only after the test had seen it idle, and start the upload
	// then (seen on a loaded machine).
	pw, done = slowUpload(t, b, "/clip.bin", 1<<20)
	if _, err := pw.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	boardtest.WaitFor(t, 30*time.Second, "the upload to run", func() bool {
		return b.Do("GET", "/fs/file?path=/other", nil).Status == 409
	})
	pw.CloseWithError(io.ErrUnexpectedEOF)
	if err := <-done; err == nil {
		t.Fatal("cut-off upload succeeded")
	}
	var d boardtest.Reply
	boardtest.WaitFor(t, 30*time.Second, "the .part file to go and the upload to let go of the lock", func() bool {
		_, err := os.Stat(part)
		if !os.IsNotExist(err) {
			return false
		}
		d = b.Do("GET", "/fs/file?path=/clip.bin", nil)
		return d.Status != 409
	})
	if !bytes.Equal(d.Body, old) {
		t.Errorf("old file after a cut-off upload: %q", d.Body)
	}
	expect(t, b.Do("GET", "/fs/entry?path=/other&sha256=1", nil), 200, "")
}
