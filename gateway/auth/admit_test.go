package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// AdmitHTTP is the door of the REST routes beside the API's (the
// installation, the DMX patch): who is calling, may they, answered in
// the REST error form, every refusal audited with where it came from.
func TestAdmitHTTP(t *testing.T) {
	toks, db := openTokens(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	viewer, _, err := toks.Create("vic", RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := toks.Create("ada", RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token string
		verb        Verb
		status      int // 0: let in
		code        string
		challenge   string
		audited     string // the record's code; "" none
	}{
		{"no token", "", VerbRead, http.StatusUnauthorized, "unauthenticated", `Bearer realm="holo-gateway"`, CodeUnauthenticated},
		{"bad token", "holo_nope", VerbRead, http.StatusUnauthorized, "unauthenticated", `Bearer realm="holo-gateway"`, CodeUnauthenticated},
		{"viewer changes", viewer, VerbUpdate, http.StatusForbidden, "permission_denied", "", CodePermissionDenied},
		{"viewer reads", viewer, VerbRead, 0, "", "", ""},
		{"admin changes", admin, VerbUpdate, 0, "", "", CodeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			g := &Guard{Tokens: toks, Audit: rec}
			r := httptest.NewRequest("PUT", "/v1/dmx/patch", nil)
			r.RemoteAddr = "192.0.2.7:4000"
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			_, p, ok := g.AdmitHTTP(w, r, Attributes{Verb: tc.verb, Resource: ResDMX, Operation: "PUT /v1/dmx/patch"})
			if ok != (tc.status == 0) {
				t.Fatalf("let in %v, want status %d", ok, tc.status)
			}
			if ok {
				p.Done(CodeOK)
			} else {
				var body struct{ Error, Message string }
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tc.status || body.Error != tc.code || body.Message == "" {
					t.Fatalf("answer %d %q (%v), want %d %s", w.Code, w.Body.String(), err, tc.status, tc.code)
				}
				if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
					t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
				}
			}
			if tc.audited == "" {
				if len(rec.recs) != 0 {
					t.Fatalf("records %+v, want none", rec.recs)
				}
				return
			}
			if len(rec.recs) != 1 {
				t.Fatalf("records %+v, want one", rec.recs)
			}
			got := rec.recs[0]
			if got.Code != tc.audited || got.Surface != SurfaceREST || got.Client != "192.0.2.7:4000" || got.Operation != "PUT /v1/dmx/patch" {
				t.Errorf("record %+v", got)
			}
		})
	}
}
