package auth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/store"
)

// printer is an Auditor that prints what it would keep.
type printer struct{}

func (printer) Audit(r auth.Record) {
	fmt.Printf("audit: %s %q %s %s %v -> allowed=%v %s\n", r.Surface, r.Who.Name, r.Verb, r.Resource, r.Boards, r.Allowed, r.Code)
}

// A surface other than the API (here an MQTT bridge taking a board call
// from a client whose password is a token) asks the same Guard: identify,
// describe, check, do, record the outcome.
func ExampleGuard() {
	dir, _ := os.MkdirTemp("", "auth-example")
	defer os.RemoveAll(dir)
	db, _ := store.Open(filepath.Join(dir, "gw.db"))
	defer db.Close()
	tokens, _ := auth.Open(db)
	secret, _, _ := tokens.Create("stage-panel", auth.RoleOperator)

	g := &auth.Guard{Tokens: tokens, Audit: printer{}, Now: func() time.Time { return time.Unix(0, 0) }}
	caller := auth.Caller{Authorization: "Bearer " + secret, Addr: "10.0.0.9:50122", Surface: auth.SurfaceMQTT}
	id, err := g.Identify(caller)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, path := range []string{"/leds", "/ota/pull"} {
		a := auth.Attributes{Who: id, Surface: caller.Surface, Verb: auth.VerbCall, Resource: auth.ResBoardAPI,
			Method: "POST", Path: path, Boards: []string{"holo-3f2a"}, Client: caller.Addr, Operation: "holo/holo-3f2a/call"}
		p, err := g.Check(a)
		if err != nil {
			fmt.Println("refused:", err)
			continue
		}
		// ... make the call, then record how it ended:
		p.Done(auth.CodeOK)
	}
	// Output:
	// audit: mqtt "stage-panel" call board_api [holo-3f2a] -> allowed=true OK
	// audit: mqtt "stage-panel" call board_api [holo-3f2a] -> allowed=false PermissionDenied
	// refused: auth: role does not allow this call: call POST /ota/pull needs admin; "stage-panel" is operator
}
