package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Every REST route's error reads the same: status, JSON type, the two
// fields, and the bearer challenge on a 401 only.
func TestError(t *testing.T) {
	for _, tc := range []struct {
		status          int
		code, msg, body string
		challenge       string
	}{
		{401, "unauthenticated", "auth: bearer token required",
			`{"error":"unauthenticated","message":"auth: bearer token required"}` + "\n", `Bearer realm="holo-gateway"`},
		{403, "permission_denied", "no", `{"error":"permission_denied","message":"no"}` + "\n", ""},
		{404, "not_found", `a "quoted" <path>`, `{"error":"not_found","message":"a \"quoted\" \u003cpath\u003e"}` + "\n", ""},
	} {
		w := httptest.NewRecorder()
		Error(w, tc.status, tc.code, tc.msg)
		if w.Code != tc.status || w.Body.String() != tc.body {
			t.Errorf("%d: got %d %q, want %q", tc.status, w.Code, w.Body.String(), tc.body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%d: Content-Type %q", tc.status, ct)
		}
		if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
			t.Errorf("%d: WWW-Authenticate %q, want %q", tc.status, got, tc.challenge)
		}
	}
}

func TestJSON(t *testing.T) {
	w := httptest.NewRecorder()
	JSON(w, http.StatusCreated, map[string]int{"n": 1})
	if w.Code != 201 || w.Body.String() != `{"n":1}`+"\n" || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q %v", w.Code, w.Body.String(), w.Header())
	}
}
