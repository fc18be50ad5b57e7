package auth

import (
	"errors"
	"testing"
)

func TestAuthorize(t *testing.T) {
	viewer := Identity{Name: "v", Role: RoleViewer}
	op := Identity{Name: "o", Role: RoleOperator}
	admin := Identity{Name: "a", Role: RoleAdmin}
	none := Identity{Name: "anon", Role: RoleNone}
	call := func(who Identity, m, p string) Attributes {
		return Attributes{Who: who, Verb: VerbCall, Resource: ResBoardAPI, Method: m, Path: p}
	}
	tests := []struct {
		name string
		a    Attributes
		want bool
	}{
		{"viewer lists boards", Attributes{Who: viewer, Verb: VerbRead, Resource: ResBoards}, true},
		{"viewer watches events", Attributes{Who: viewer, Verb: VerbWatch, Resource: ResEvents}, true},
		{"nobody lists boards", Attributes{Who: none, Verb: VerbRead, Resource: ResBoards}, false},
		{"viewer acts", Attributes{Who: viewer, Verb: VerbAct, Resource: ResActions, Kind: "leds"}, false},
		{"operator acts", Attributes{Who: op, Verb: VerbAct, Resource: ResActions, Kind: "leds"}, true},
		{"operator labels", Attributes{Who: op, Verb: VerbUpdate, Resource: ResBoards}, true},
		{"viewer labels", Attributes{Who: viewer, Verb: VerbUpdate, Resource: ResBoards}, false},
		{"operator creates rollout", Attributes{Who: op, Verb: VerbCreate, Resource: ResRollouts}, false},
		{"admin creates rollout", Attributes{Who: admin, Verb: VerbCreate, Resource: ResRollouts}, true},
		{"viewer reads rollouts", Attributes{Who: viewer, Verb: VerbRead, Resource: ResRollouts}, true},
		{"operator halts rollout", Attributes{Who: op, Verb: VerbHalt, Resource: ResRollouts}, true},
		{"viewer halts rollout", Attributes{Who: viewer, Verb: VerbHalt, Resource: ResRollouts}, false},
		{"operator resumes rollout", Attributes{Who: op, Verb: VerbUpdate, Resource: ResRollouts}, false},
		{"admin halts artifacts", Attributes{Who: admin, Verb: VerbHalt, Resource: ResArtifacts}, false},
		{"operator reads tokens", Attributes{Who: op, Verb: VerbRead, Resource: ResTokens}, false},
		{"admin reads tokens", Attributes{Who: admin, Verb: VerbRead, Resource: ResTokens}, true},
		{"operator reads audit", Attributes{Who: op, Verb: VerbRead, Resource: ResAudit}, false},
		{"admin reads audit", Attributes{Who: admin, Verb: VerbRead, Resource: ResAudit}, true},
		{"viewer reads metrics", Attributes{Who: viewer, Verb: VerbRead, Resource: ResMetrics}, true},
		{"viewer asks who it is", Attributes{Who: viewer, Verb: VerbRead, Resource: ResSelf}, true},
		{"nobody asks who it is", Attributes{Who: none, Verb: VerbRead, Resource: ResSelf}, false},
		{"operator pauses rollout", Attributes{Who: op, Verb: VerbHalt, Resource: ResRollouts}, true},
		{"viewer pauses rollout", Attributes{Who: viewer, Verb: VerbHalt, Resource: ResRollouts}, false},
		{"admin stops tokens", Attributes{Who: admin, Verb: VerbHalt, Resource: ResTokens}, false},
		{"viewer reads discovery", Attributes{Who: viewer, Verb: VerbRead, Resource: ResDiscovery}, true},
		{"viewer refreshes discovery", Attributes{Who: viewer, Verb: VerbUpdate, Resource: ResDiscovery}, false},
		{"operator refreshes discovery", Attributes{Who: op, Verb: VerbUpdate, Resource: ResDiscovery}, true},
		{"admin deletes discovery", Attributes{Who: admin, Verb: VerbDelete, Resource: ResDiscovery}, false},
		{"viewer reads the cluster", Attributes{Who: viewer, Verb: VerbRead, Resource: ResCluster}, true},
		{"nobody reads the cluster", Attributes{Who: none, Verb: VerbRead, Resource: ResCluster}, false},
		{"operator removes a gateway", Attributes{Who: op, Verb: VerbDelete, Resource: ResCluster}, false},
		{"admin removes a gateway", Attributes{Who: admin, Verb: VerbDelete, Resource: ResCluster}, true},
		{"viewer reads the cue lists", Attributes{Who: viewer, Verb: VerbRead, Resource: ResCues}, true},
		{"viewer watches the cue lists", Attributes{Who: viewer, Verb: VerbWatch, Resource: ResCues}, true},
		{"viewer may not GO", Attributes{Who: viewer, Verb: VerbAct, Resource: ResCues}, false},
		{"operator GOes", Attributes{Who: op, Verb: VerbAct, Resource: ResCues}, true},
		{"operator may not edit a cue list", Attributes{Who: op, Verb: VerbUpdate, Resource: ResCues}, false},
		{"operator may not delete a cue list", Attributes{Who: op, Verb: VerbDelete, Resource: ResCues}, false},
		{"admin edits a cue list", Attributes{Who: admin, Verb: VerbUpdate, Resource: ResCues}, true},
		{"admin creates a cue list", Attributes{Who: admin, Verb: VerbCreate, Resource: ResCues}, true},
		{"nobody halts cues", Attributes{Who: admin, Verb: VerbHalt, Resource: ResCues}, false},
		{"viewer reads the installation", Attributes{Who: viewer, Verb: VerbRead, Resource: ResInstallation}, true},
		{"nobody reads the installation", Attributes{Who: none, Verb: VerbRead, Resource: ResInstallation}, false},
		{"operator pauses an installation apply", Attributes{Who: op, Verb: VerbHalt, Resource: ResInstallation}, true},
		{"operator applies the installation", Attributes{Who: op, Verb: VerbCreate, Resource: ResInstallation}, false},
		{"operator rolls the installation back", Attributes{Who: op, Verb: VerbUpdate, Resource: ResInstallation}, false},
		{"admin applies the installation", Attributes{Who: admin, Verb: VerbCreate, Resource: ResInstallation}, true},
		{"admin rolls the installation back", Attributes{Who: admin, Verb: VerbUpdate, Resource: ResInstallation}, true},
		{"viewer reads the dmx patch", Attributes{Who: viewer, Verb: VerbRead, Resource: ResDMX}, true},
		{"operator changes the dmx patch", Attributes{Who: op, Verb: VerbUpdate, Resource: ResDMX}, false},
		{"admin changes the dmx patch", Attributes{Who: admin, Verb: VerbUpdate, Resource: ResDMX}, true},
		{"operator watches bridge traffic", Attributes{Who: op, Verb: VerbWatch, Resource: ResBridge}, false},
		{"admin watches bridge traffic", Attributes{Who: admin, Verb: VerbWatch, Resource: ResBridge}, true},
		{"admin writes events", Attributes{Who: admin, Verb: VerbUpdate, Resource: ResEvents}, false},
		{"unknown verb", Attributes{Who: admin, Verb: "explode", Resource: ResBoards}, false},
		{"unknown resource", Attributes{Who: admin, Verb: VerbRead, Resource: "moon"}, false},

		{"operator PATCH /leds", call(op, "PATCH", "/leds"), true},
		{"operator PATCH /api/v1/leds", call(op, "PATCH", "/api/v1/leds"), true},
		{"viewer PATCH /leds", call(viewer, "PATCH", "/leds"), false},
		{"viewer GET /leds", call(viewer, "GET", "/leds"), false},
		{"operator GET /info", call(op, "GET", "/info"), true},
		{"operator GET /fs/file", call(op, "GET", "/fs/file?path=/a"), true},
		{"operator POST /scenes/apply", call(op, "POST", "/scenes/apply"), true},
		{"operator POST /screen/show", call(op, "POST", "/screen/show"), true},
		{"operator POST /holo/motion", call(op, "POST", "/holo/motion"), true},
		{"operator POST /ota/pull", call(op, "POST", "/ota/pull"), false},
		{"operator PUT /ota/image", call(op, "PUT", "/ota/image"), false},
		{"operator PATCH /web", call(op, "PATCH", "/web"), false},
		{"operator GET /web", call(op, "GET", "/web"), false},
		{"operator PATCH /network", call(op, "PATCH", "/network"), false},
		{"operator PATCH /settings", call(op, "PATCH", "/settings"), false},
		{"operator POST /restart", call(op, "POST", "/restart"), false},
		{"operator PUT /fs/file", call(op, "PUT", "/fs/file?path=/x"), false},
		{"operator DELETE /fs/entry", call(op, "DELETE", "/fs/entry"), false},
		{"operator PUT /servos/calibration", call(op, "PUT", "/servos/calibration"), false},
		{"operator sneaks by dot-dot", call(op, "POST", "/leds/../ota/pull"), false},
		{"operator sneaks by double slash", call(op, "POST", "//ota/pull"), false},
		{"operator lower-case method", call(op, "post", "/ota/pull"), false},
		{"relative path", call(admin, "GET", "info"), false},
		{"admin POST /ota/pull", call(admin, "POST", "/ota/pull"), true},
		{"admin PATCH /web", call(admin, "PATCH", "/web"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Authorize(tt.a)
			if d.Allowed != tt.want {
				t.Fatalf("Authorize = %+v, want allowed=%v", d, tt.want)
			}
			if d.Reason == "" {
				t.Error("a decision without a reason")
			}
			if err := d.Err(); (err == nil) != tt.want || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}

func TestChanging(t *testing.T) {
	for _, tt := range []struct {
		a    Attributes
		want bool
	}{
		{Attributes{Verb: VerbRead}, false},
		{Attributes{Verb: VerbWatch}, false},
		{Attributes{Verb: VerbAct}, true},
		{Attributes{Verb: VerbCall, Method: "GET"}, false},
		{Attributes{Verb: VerbCall, Method: "PATCH"}, true},
		{Attributes{Verb: VerbCreate}, true},
		{Attributes{Verb: VerbHalt}, true},
	} {
		if got := tt.a.Changing(); got != tt.want {
			t.Errorf("%+v Changing() = %v", tt.a, got)
		}
	}
}
