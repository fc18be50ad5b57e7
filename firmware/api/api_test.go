package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type body struct {
	Mode  *string `json:"mode,omitempty"`
	Count *int    `json:"count,omitempty"`
}

func TestDecodeBytes(t *testing.T) {
	tests := []struct {
		in       string
		optional bool
		want     *Error
	}{
		{`{"mode":"solid","count":3}`, false, nil},
		{` {} `, false, nil},
		{``, true, nil},
		{``, false, ErrBadJSON},
		{`{"mode":`, false, ErrBadJSON},
		{`{"mode":"a"} {}`, false, ErrBadJSON},
		{`[1]`, false, ErrBadRequest},
		{`"x"`, false, ErrBadRequest},
		{`nonsense`, false, ErrBadJSON},
		{`{"count":"3"}`, false, ErrBadRequest},
		{`{"count":2.5}`, false, ErrBadRequest},
		{`{"speed":1}`, false, ErrBadRequest},
	}
	for _, tt := range tests {
		var b body
		err := DecodeBytes([]byte(tt.in), &b, tt.optional)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("DecodeBytes(%q) = %v, want %v", tt.in, err, tt.want)
		}
		if err != nil && Wrap(err).Message == "" {
			t.Errorf("DecodeBytes(%q): error without a message", tt.in)
		}
	}
}

func TestDecodeTooLarge(t *testing.T) {
	r := httptest.NewRequest("PATCH", "/x", strings.NewReader(`{"mode":"`+strings.Repeat("a", MaxJSONBody)+`"}`))
	if err := Decode(r, &body{}, false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
}

func TestErrorsAndWriting(t *testing.T) {
	e := Errorf(ErrBusy, "upload running")
	if !errors.Is(e, ErrBusy) || errors.Is(e, ErrStreamsBusy) {
		t.Fatal("Is must match code and status")
	}
	if w := Wrap(errors.New("disk")); w.Status != 500 || w.Code != "internal" {
		t.Fatalf("Wrap: %+v", w)
	}
	rec := httptest.NewRecorder()
	WriteError(rec, Errorf(ErrAuthRequired, "x"))
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != "Bearer" || !strings.Contains(rec.Body.String(), `"error":"auth_required"`) {
		t.Fatalf("WriteError: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	status, reply := Invoke(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, 202, map[string]int{"a": 1})
	}), httptest.NewRequest("GET", "/", nil))
	if status != 202 || string(reply) != `{"a":1}` {
		t.Fatalf("Invoke: %d %q", status, reply)
	}
}
