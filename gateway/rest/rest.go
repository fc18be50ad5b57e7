// Package rest writes the answers of the gateway's REST routes: a JSON
// value, or the error body every REST route answers with,
//
//	{"error": "<snake_case code>", "message": "<text>"}
//
// (docs/gateway-api.md and api/server.go say which codes). The API's own routes
// (gateway/api) and the routes served beside them on its listener (the
// installation, the DMX patch) and the boards' image handler (artifact)
// all answer through it, so a client reads one form wherever it calls.
// A 401 carries WWW-Authenticate: Bearer with the gateway's realm, as
// RFC 9110 asks of it.
package rest

import (
	"encoding/json"
	"net/http"
)

// Realm is the realm of the gateway's WWW-Authenticate challenge.
const Realm = "holo-gateway"

// JSON writes v as JSON with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

// Error writes the error body with status; a 401 also carries the
// bearer challenge.
func Error(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`"`)
	}
	JSON(w, status, errorBody{Error: code, Message: msg})
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}
