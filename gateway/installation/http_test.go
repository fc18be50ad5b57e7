package installation_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/installation"
)

type memAudit struct {
	mu   sync.Mutex
	recs []auth.Record
}

func (m *memAudit) Audit(r auth.Record) {
	m.mu.Lock()
	m.recs = append(m.recs, r)
	m.mu.Unlock()
}

func (m *memAudit) find(op string) []auth.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []auth.Record
	for _, r := range m.recs {
		if r.Operation == op {
			out = append(out, r)
		}
	}
	return out
}

// TestREST drives the installation over its REST surface with tokens of
// each role: content upload and apply need an admin; a viewer plans and
// reads the status; every change is audited, board by board with the
// revision.
func TestREST(t *testing.T) {
	aud := &memAudit{}
	r := startRig(t, 2, nil, func(o *installation.Options) { o.Audit = aud })
	r.label(t)
	tokens, err := auth.Open(r.db)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, _ := tokens.Create("ada", auth.RoleAdmin)
	viewer, _, _ := tokens.Create("vic", auth.RoleViewer)
	op, _, _ := tokens.Create("otto", auth.RoleOperator)
	guard := &auth.Guard{Tokens: tokens, Audit: aud}
	srv := httptest.NewServer(r.in.Handler(guard))
	defer srv.Close()

	do := func(token, method, path string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	// Content goes up first, by an admin only.
	clip, _ := os.ReadFile(filepath.Join(media, "clip-240-30fps.mov"))
	if code, _ := do(viewer, "POST", "/v1/installation/content", clip); code != http.StatusForbidden {
		t.Fatalf("viewer adds content: %d", code)
	}
	if code, _ := do("", "POST", "/v1/installation/content", clip); code != http.StatusUnauthorized {
		t.Fatalf("no token adds content: %d", code)
	}
	shas := map[string]string{}
	for _, f := range []string{"clip-240-30fps.mov", "image-240.png", "image-baseline.jpg"} {
		b, _ := os.ReadFile(filepath.Join(media, f))
		code, body := do(admin, "POST", "/v1/installation/content", b)
		if code != 200 {
			t.Fatalf("content %s: %d %s", f, code, body)
		}
		var c struct{ SHA256 string }
		json.Unmarshal(body, &c)
		shas[f] = c.SHA256
	}
	text := desc(false, "image")
	text = strings.ReplaceAll(text, "{file: $MEDIA/clip-240-30fps.mov}", "{sha256: \""+shas["clip-240-30fps.mov"]+"\"}")
	text = strings.ReplaceAll(text, "{file: $MEDIA/image-240.png}", "{sha256: \""+shas["image-240.png"]+"\"}")
	text = strings.ReplaceAll(text, "{file: $MEDIA/image-baseline.jpg}", "{sha256: \""+shas["image-baseline.jpg"]+"\"}")

	// A bad description is refused with its place.
	code, body := do(viewer, "POST", "/v1/installation/plan?file=x.yaml", []byte("version: 1\nprofiles: {p: {filez: {}}}\n"))
	if code != 400 || !strings.Contains(string(body), "x.yaml:2:") {
		t.Fatalf("bad plan: %d %s", code, body)
	}
	// A description may not name files of the gateway's machine: the
	// gateway would read them into its store.
	code, body = do(admin, "POST", "/v1/installation/apply", []byte(`{"version":1,"content":{"x":{"file":"/etc/passwd"}},"profiles":{"p":{"files":{"/x.txt":"x"}}},"assignments":[{"profile":"p","group":1}]}`))
	if code != 400 || !strings.Contains(string(body), "not a file of this machine") {
		t.Fatalf("a local file in a description: %d %s", code, body)
	}
	if h, _ := r.in.History(); len(h) != 0 {
		t.Fatalf("a refused apply stored a revision: %+v", h)
	}
	// The viewer sees the plan.
	code, body = do(viewer, "POST", "/v1/installation/plan", []byte(text))
	if code != 200 || !strings.Contains(string(body), `"drifted"`) {
		t.Fatalf("plan: %d %s", code, body)
	}
	// Operators may not apply; admins may.
	if code, _ := do(op, "POST", "/v1/installation/apply", []byte(text)); code != http.StatusForbidden {
		t.Fatalf("operator applies: %d", code)
	}
	code, body = do(admin, "POST", "/v1/installation/apply?message=first", []byte(text))
	if code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	var ap struct {
		Revision installation.Revision
		Run      installation.RunStatus
	}
	json.Unmarshal(body, &ap)
	if ap.Revision.N != 1 || ap.Revision.Who != "ada" || ap.Revision.Message != "first" {
		t.Fatalf("revision %+v", ap.Revision)
	}
	st := r.waitRun(t, ap.Run.ID)
	if st.Phases[installation.PhaseInSync] != 2 {
		t.Fatalf("run %+v", st)
	}
	// Every board's change is in the audit log with the revision, and the
	// apply itself with its caller.
	if recs := aud.find("installation.apply_board"); len(recs) != 2 || recs[0].Name != "revision 1" || recs[0].Who.Name != "ada" {
		t.Errorf("board records: %+v", recs)
	}
	// The refused local file, the operator's denial, the admin's apply.
	if recs := aud.find("POST /v1/installation/apply"); len(recs) != 3 || recs[0].Code != "InvalidArgument" || recs[2].Code != auth.CodeOK || recs[2].Who.Name != "ada" {
		t.Errorf("apply records: %+v", recs)
	}
	// Status and history for a viewer.
	r.settle(t, r.parse(t, desc(false, "image")))
	code, body = do(viewer, "GET", "/v1/installation/status", nil)
	var status installation.Status
	json.Unmarshal(body, &status)
	if code != 200 || status.Counts[installation.StateInSync] != 2 {
		t.Fatalf("status: %d %s", code, body)
	}
	code, body = do(viewer, "GET", "/v1/installation/history", nil)
	if code != 200 || !strings.Contains(string(body), `"who":"ada"`) {
		t.Fatalf("history: %d %s", code, body)
	}
	// Rollback needs an admin.
	if code, _ := do(op, "POST", "/v1/installation/rollback", []byte(`{"revision":1}`)); code != http.StatusForbidden {
		t.Fatalf("operator rolls back: %d", code)
	}
	code, body = do(admin, "POST", "/v1/installation/rollback", []byte(`{"revision":1}`))
	if code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	json.Unmarshal(body, &ap)
	r.waitRun(t, ap.Run.ID)
	if ap.Revision.RollbackOf != 1 || ap.Revision.N != 2 {
		t.Fatalf("rollback revision %+v", ap.Revision)
	}
	code, body = do(viewer, "GET", "/v1/installation/schema", nil)
	if code != 200 || !bytes.Equal(body, installation.Schema) {
		t.Fatalf("schema: %d", code)
	}
	if code, _ := do(viewer, "GET", "/v1/installation/revisions/9", nil); code != 404 {
		t.Fatalf("missing revision: %d", code)
	}
}
