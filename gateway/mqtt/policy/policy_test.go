package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/auth"
)

var (
	viewer   = auth.Identity{Name: "v", Role: auth.RoleViewer}
	operator = auth.Identity{Name: "o", Role: auth.RoleOperator}
	admin    = auth.Identity{Name: "a", Role: auth.RoleAdmin}
	nobody   = auth.Identity{Name: "anonymous", Role: auth.RoleNone}
)

// TestPolicyPublish: the least role each publication needs.
func TestPolicyPublish(t *testing.T) {
	p, err := New("holo", "homeassistant")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		topic, payload string
		need           auth.Role // RoleNone: no one
	}{
		{"holo/kitchen/set/leds", `{"mode":"off"}`, auth.RoleOperator},
		{"holo/kitchen/set/screen", `{"off":true}`, auth.RoleOperator},
		{"holo/kitchen/set/holo", `{"motion":"nod"}`, auth.RoleOperator},
		{"holo/kitchen/set/scene", `{"end":true}`, auth.RoleOperator},
		{"holo/kitchen/set/settings", `{}`, auth.RoleAdmin},
		{"holo/kitchen/set/restart", `{}`, auth.RoleAdmin},
		{"holo/kitchen/set/update", `install`, auth.RoleAdmin},
		{"holo/kitchen/set/unknown", `{}`, auth.RoleAdmin},
		{"holo/group/1/set/leds", `{}`, auth.RoleOperator},
		{"holo/group/x/set/scene", `{}`, auth.RoleOperator},
		{"holo/group/1/set/restart", `{}`, auth.RoleAdmin},
		{"holo/bridge/request/boards", `{}`, auth.RoleViewer},
		{"holo/bridge/request/board", `{"board":"kitchen"}`, auth.RoleViewer},
		{"holo/bridge/request/health", ``, auth.RoleViewer},
		{"holo/bridge/request/do", `{"selector":{"all":true},"action":{"kind":"leds"}}`, auth.RoleOperator},
		{"holo/bridge/request/scene", `{"all":true,"end":true}`, auth.RoleOperator},
		{"holo/bridge/request/labels", `{"board":"a","labels":{}}`, auth.RoleOperator},
		{"holo/bridge/request/rename", `{"board":"a","name":"b"}`, auth.RoleOperator},
		{"holo/bridge/request/discovery", `{}`, auth.RoleOperator},
		{"holo/bridge/request/call", `{"board":"a","method":"PATCH","path":"/leds"}`, auth.RoleOperator},
		{"holo/bridge/request/call", `{"board":"a","path":"/info"}`, auth.RoleOperator},
		{"holo/bridge/request/call", `{"board":"a","method":"post","path":"/ota/pull"}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `{"board":"a","method":"POST","path":"/leds/../ota/pull"}`, auth.RoleNone}, // not canonical: nobody (auth.CanonicalBoardPath)
		{"holo/bridge/request/call", `{"board":"a","method":"GET","path":"/network"}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `{"board":"a","method":"POST","path":"relative"}`, auth.RoleNone},
		// Bodies a decoder could read otherwise than the decision did.
		{"holo/bridge/request/call", `{"path":"/leds","path":"/ota/pull","method":"POST"}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `{"path":"/leds","PATH":"/ota/pull","method":"POST"}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `{"Path":"/ota/pull","method":"POST"}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `{"path":"/leds"} {"path":"/ota/pull"}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `{"path":7}`, auth.RoleAdmin},
		{"holo/bridge/request/call", `not json`, auth.RoleAdmin},
		{"holo/bridge/request/cue", `{"list":"demo","op":"state"}`, auth.RoleViewer},
		{"holo/bridge/request/cue", `{"list":"demo","op":"go"}`, auth.RoleOperator},
		{"holo/bridge/request/cue", `{"op":"start","cue":"2"}`, auth.RoleOperator},
		{"holo/bridge/request/cue", `{"op":"stop"}`, auth.RoleOperator},
		{"holo/bridge/request/cue", `{"op":"explode"}`, auth.RoleAdmin},
		{"holo/bridge/request/cue", `{"op":"state","OP":"go"}`, auth.RoleAdmin},
		{"holo/bridge/request/cue", `{"op":7}`, auth.RoleAdmin},
		{"holo/bridge/request/rollout", `{"action":"list"}`, auth.RoleViewer},
		{"holo/bridge/request/rollout", `{"action":"dry_run","plan":{}}`, auth.RoleViewer},
		{"holo/bridge/request/rollout", `{"action":"pause","id":"r1"}`, auth.RoleOperator},
		{"holo/bridge/request/rollout", `{"action":"abort","id":"r1"}`, auth.RoleOperator},
		{"holo/bridge/request/rollout", `{"action":"create","plan":{}}`, auth.RoleAdmin},
		{"holo/bridge/request/rollout", `{"action":"resume","id":"r1"}`, auth.RoleAdmin},
		{"holo/bridge/request/rollout", `{"action":"revert","id":"r1"}`, auth.RoleAdmin},
		{"holo/bridge/request/rollout", `{"action":"list","action":"create"}`, auth.RoleAdmin},
		{"holo/bridge/request/rollout", `[]`, auth.RoleAdmin},
		{"holo/bridge/request/tokens", `{}`, auth.RoleAdmin},
		{"homeassistant/status", `online`, auth.RoleOperator},
		// What the gateway publishes, and topics outside its roots.
		{"holo/kitchen/leds", `{}`, auth.RoleNone},
		{"holo/kitchen/availability", `{}`, auth.RoleNone},
		{"holo/bridge/state", `{}`, auth.RoleNone},
		{"holo/bridge/response/call", `{}`, auth.RoleNone},
		{"holo/kitchen/set/leds/extra", `{}`, auth.RoleNone},
		{"homeassistant/device/holo_1/config", `{}`, auth.RoleNone},
		{"$SYS/broker/uptime", `1`, auth.RoleNone},
		{"elsewhere/topic", `x`, auth.RoleNone},
	}
	for _, tt := range tests {
		for _, who := range []auth.Identity{nobody, viewer, operator, admin} {
			d := p.Publish(who, "", tt.topic, []byte(tt.payload))
			want := tt.need != auth.RoleNone && who.Role.Allows(tt.need)
			if d.Allowed != want {
				t.Errorf("%v publishes %s %s: %+v, want allowed=%v", who.Role, tt.topic, tt.payload, d, want)
			}
		}
	}
}

// TestPolicyRead: who may be sent what, and subscribe to which filters.
func TestPolicyRead(t *testing.T) {
	p, err := New("holo", "homeassistant")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		topic string
		need  auth.Role
	}{
		{"holo/kitchen/leds", auth.RoleViewer},
		{"holo/kitchen/event/button", auth.RoleViewer},
		{"holo/bridge/state", auth.RoleViewer},
		{"holo/bridge/rollout/r1", auth.RoleViewer},
		{"holo/kitchen/set/leds", auth.RoleViewer},
		{"holo/group/1/set/leds", auth.RoleViewer},
		{"holo/bridge/response/boards", auth.RoleViewer},
		{"holo/bridge/response/rollout", auth.RoleViewer},
		{"holo/bridge/response/invalid", auth.RoleViewer},
		{"holo/bridge/response/call", auth.RoleAdmin},
		{"holo/bridge/response/tokens", auth.RoleAdmin},
		{"holo/bridge/request/call", auth.RoleAdmin},
		{"holo/bridge/request/rollout", auth.RoleAdmin},
		{"homeassistant/device/holo_1/config", auth.RoleViewer},
		{"homeassistant/status", auth.RoleViewer},
		{"$SYS/broker/clients/connected", auth.RoleViewer},
		{"elsewhere/topic", auth.RoleAdmin},
		// Filters.
		{"#", auth.RoleViewer},
		{"holo/#", auth.RoleViewer},
		{"+/+/leds", auth.RoleViewer},
		{"homeassistant/#", auth.RoleViewer},
		{"$SYS/#", auth.RoleViewer},
		{"$share/g/holo/#", auth.RoleViewer},
		{"elsewhere/#", auth.RoleAdmin},
		{"holo", auth.RoleAdmin}, // the root topic itself is no one's
		{"$other/#", auth.RoleAdmin},
	}
	for _, tt := range tests {
		for _, who := range []auth.Identity{nobody, viewer, operator, admin} {
			var d auth.Decision
			if strings.ContainsAny(tt.topic, "+#") || strings.HasPrefix(tt.topic, "$share/") {
				d = p.Subscribe(who, "", tt.topic)
			} else {
				d = p.Read(who, tt.topic)
				if s := p.Subscribe(who, "", tt.topic); s.Allowed != d.Allowed {
					t.Errorf("subscribing to %s and reading it differ: %+v %+v", tt.topic, s, d)
				}
			}
			want := who.Role.Allows(tt.need)
			if d.Allowed != want {
				t.Errorf("%v reads %s: %+v, want allowed=%v", who.Role, tt.topic, d, want)
			}
		}
	}
}

// TestPolicyGateway: the bridge's own identity writes what it mirrors and
// reads the commands, and nothing else.
func TestPolicyGateway(t *testing.T) {
	p, err := New("show/holo", "ha")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		topic   string
		publish bool
		want    bool
	}{
		{"show/holo/kitchen/leds", true, true},
		{"show/holo/bridge/state", true, true},
		{"show/holo/bridge/response/call", true, true},
		{"ha/device/holo_1/config", true, true},
		{"show/holo/kitchen/set/leds", true, false},
		{"show/holo/bridge/request/rollout", true, false},
		{"ha/status", true, false},
		{"elsewhere", true, false},
		{"show/holo/+/set/+", false, true},
		{"show/holo/group/+/set/+", false, true},
		{"show/holo/bridge/request/+", false, true},
		{"ha/status", false, true},
		{"show/holo/kitchen/set/leds", false, true},
		{"show/holo/bridge/request/call", false, true},
		{"show/holo/#", false, false},
		{"show/holo/kitchen/leds", false, false},
	} {
		if got := p.Gateway(tt.topic, tt.publish); got != tt.want {
			t.Errorf("Gateway(%s, publish=%v) = %v", tt.topic, tt.publish, got)
		}
	}
}

// FuzzPolicyCall: whatever call body the policy lets an operator send, a
// case-insensitive, last-key-wins decoder (encoding/json into a struct,
// what the bridge uses) reads the same method and path; and nothing
// panics.
func FuzzPolicyCall(f *testing.F) {
	for _, s := range []string{
		`{"board":"a","method":"PATCH","path":"/leds"}`, `{"path":"/leds","path":"/ota/pull"}`,
		`{"path":"/leds","PATH":"/ota/pull"}`, `{"Path":"/leds"}`, `{"method":"get","path":"/info"}`, `[]`, ``,
		`{"path":"/leds"}x`, `{"path":"/le\u0064s"}`, `{"pa\u0074h":"/ota/pull","path":"/leds"}`,
	} {
		f.Add([]byte(s))
	}
	p, err := New("holo", "homeassistant")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		a := p.PublishAttributes(operator, "holo/bridge/request/call", payload)
		p.PublishAttributes(operator, "holo/bridge/request/rollout", payload)
		if !auth.Authorize(a).Allowed {
			return
		}
		var r struct{ Method, Path string }
		if err := json.Unmarshal(payload, &r); err != nil {
			return // the bridge refuses it
		}
		m := strings.ToUpper(r.Method)
		if m == "" {
			m = "GET"
		}
		if m != a.Method || r.Path != a.Path {
			t.Fatalf("decided %s %s, a decoder reads %s %s", a.Method, a.Path, m, r.Path)
		}
	})
}

// BenchmarkPolicy: the decisions the embedded broker makes per message
// sent (Read) and per command (Publish of a raw call).
func BenchmarkPolicy(b *testing.B) {
	p, err := New("holo", "homeassistant")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Read(viewer, "holo/kitchen/leds")
		}
	})
	b.Run("publish-call", func(b *testing.B) {
		b.ReportAllocs()
		payload := []byte(`{"board":"kitchen","method":"PATCH","path":"/leds","body":{"mode":"off"},"transaction":"t"}`)
		for b.Loop() {
			p.Publish(operator, "", "holo/bridge/request/call", payload)
		}
	})
}
