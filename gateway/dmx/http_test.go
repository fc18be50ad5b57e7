package dmx

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/store"
)

type records struct {
	mu sync.Mutex
	rs []auth.Record
}

func (r *records) Audit(rec auth.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rs = append(r.rs, rec)
}

func (r *records) all() []auth.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]auth.Record(nil), r.rs...)
}

// TestPatchHTTP: a viewer reads the patch and the sources; only an admin
// changes it; a bad patch is refused whole with its reason; changes and
// refusals are audited.
func TestPatchHTTP(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokens, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, _ := tokens.Create("vic", auth.RoleViewer)
	admin, _, _ := tokens.Create("ada", auth.RoleAdmin)
	rec := &records{}
	r := newRig(t, groupPatch(), auth.RoleOperator)
	r.e.Data(sacnFrame(1, "desk", 100, 1, slots(1, 255)))
	var saved *Patch
	srv := httptest.NewServer(&Handler{Engine: r.e, Guard: &auth.Guard{Tokens: tokens, Audit: rec}, Save: func(p *Patch) error { saved = p; return nil }})
	t.Cleanup(srv.Close)
	do := func(method, token, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+PatchPath, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := do("GET", "", ""); code != http.StatusUnauthorized || m["error"] != "unauthenticated" {
		t.Errorf("no token: %d %v", code, m)
	}
	// The route answers a missing token as the API's routes do: with the
	// bearer challenge.
	if resp, err := http.Get(srv.URL + PatchPath); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="holo-gateway"` {
			t.Errorf("no token: WWW-Authenticate %q", got)
		}
	}
	code, m := do("GET", viewer, "")
	if code != 200 || len(m["sources"].([]any)) != 1 || m["profiles"].(map[string]any)["holo"] == nil {
		t.Fatalf("%d %v", code, m)
	}
	good := `{"fixtures":[{"universe":3,"address":1,"profile":"holo","group":2}]}`
	if code, _ := do("PUT", viewer, good); code != http.StatusForbidden {
		t.Errorf("viewer PUT: %d", code)
	}
	code, m = do("PUT", admin, `{"fixtures":[{"universe":3,"address":510,"profile":"holo","group":2}]}`)
	if code != http.StatusBadRequest || !strings.Contains(m["message"].(string), "do not fit a universe") {
		t.Errorf("bad patch: %d %v", code, m)
	}
	if saved != nil || r.e.Patch().Fixtures[0].Universe != 1 {
		t.Fatal("a refused patch changed something")
	}
	if code, m := do("PUT", admin, good); code != 200 {
		t.Fatalf("%d %v", code, m)
	}
	if saved == nil || r.e.Patch().Fixtures[0].Universe != 3 {
		t.Fatal("patch not taken")
	}
	var got []string
	for _, rc := range rec.all() {
		got = append(got, rc.Who.Name+" "+string(rc.Verb)+" "+rc.Code)
	}
	want := "vic update PermissionDenied|ada update InvalidArgument|ada update OK"
	if strings.Join(got[len(got)-3:], "|") != want {
		t.Errorf("audit %q, want the last three %q", got, want)
	}
}
