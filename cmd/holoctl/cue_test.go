package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/store"
)

const showJSON = `{"cues":[
 {"number":"1","name":"red","actions":[{"kind":"leds","selector":{"groups":[1]},"body":{"mode":"solid","colour":"red","loop":true}}],"notes":"house out"},
 {"number":"2","name":"blue","actions":[{"kind":"leds","selector":{"groups":[2]},"body":{"mode":"solid","colour":"blue","loop":true}}],"follow":"after","follow_ms":60000},
 {"number":"3","name":"off","actions":[{"kind":"leds","selector":{"all":true},"body":{"mode":"off"}}]}]}`

// startCueGateway runs the API with the cue routes; it returns the URL
// and an admin's and an operator's secrets.
func startCueGateway(t *testing.T) (string, string, string) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, _ := toks.Create("admin", auth.RoleAdmin)
	op, _, _ := toks.Create("ops", auth.RoleOperator)
	fl := &stubFleet{}
	eng, err := cue.New(cue.Options{DB: db, Fleet: fl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	guard := &auth.Guard{Tokens: toks}
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Fleet: fl, Tokens: toks, Registerer: reg, Gatherer: reg, Guard: guard, Cues: eng})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("gateway did not stop")
		}
	})
	return "http://" + ln.Addr().String(), admin, op
}

func TestHoloctlCue(t *testing.T) {
	url, admin, op := startCueGateway(t)
	ctl := func(token string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"cue", "--gateway", url, "--token-file", tokenFile(t, token)}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	file := filepath.Join(t.TempDir(), "show.json")
	if err := os.WriteFile(file, []byte(showJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		token string
		args  []string
		code  int
		has   string
	}{
		{op, []string{"--list", "show", "put", file}, 1, "403"},
		{admin, []string{"put", file}, 2, "needs --list"},
		{admin, []string{"--list", "show", "put", file}, 0, `"name": "show"`},
		{op, []string{"list"}, 0, "show 3"},
		{op, []string{"--list", "show", "list"}, 0, "> 1 red"},
		{op, []string{"go"}, 0, "standby: 2 blue"},
		{op, []string{"go"}, 0, "running: 3 off"},
		{op, []string{"state"}, 0, "follow"},
		{op, []string{"stop"}, 0, "standby: (end of list)"},
		{op, []string{"back"}, 0, "standby: 3 off"},
		{op, []string{"standby", "1"}, 0, "notes: house out"},
		{op, []string{"--asap", "jump", "1"}, 0, "standby: 2 blue"},
		{op, []string{"standby", "9"}, 1, "404"},
		{op, []string{"jump"}, 2, "jump N"},
		{op, []string{"dance"}, 2, "unknown cue command"},
		{op, []string{"-o", "json", "state"}, 0, `"list": "show"`},
		{op, []string{"--list", "show", "delete"}, 1, "403"},
		{admin, []string{"--list", "show", "delete"}, 0, "deleted"},
	} {
		code, out, errOut := ctl(step.token, step.args...)
		// Columns are aligned by tabwriter: compare with single spaces.
		flat := strings.Join(strings.Fields(out+errOut), " ")
		if code != step.code || !strings.Contains(flat, step.has) {
			t.Fatalf("holoctl cue %v: exit %d\n%s%s\nwant exit %d with %q", step.args, code, out, errOut, step.code, step.has)
		}
	}
}
