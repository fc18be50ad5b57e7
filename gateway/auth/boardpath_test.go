package auth

import (
	"errors"
	"testing"
)

// TestCanonicalBoardPath is the table of tricky raw-call paths: each is
// either canonical (sent as is, the policy matching its decoded route) or
// refused, and an operator can read the admin-only /web and /network
// through none of them.
func TestCanonicalBoardPath(t *testing.T) {
	for _, tc := range []struct {
		in          string
		send, route string // "" with ok false: refused
		ok          bool
	}{
		{"/web", "/web", "/web", true},
		{"/leds", "/leds", "/leds", true},
		{"/", "/", "/", true},
		{"/leds?x=1&y=%2F", "/leds?x=1&y=%2F", "/leds", true},
		{"/api/v1/leds", "/leds", "/leds", true},
		{"/api/v1", "/", "/", true},
		{"/files/my%20clip.mov", "/files/my%20clip.mov", "/files/my clip.mov", true},
		{"/files/a(1)&b.mov", "/files/a(1)&b.mov", "/files/a(1)&b.mov", true},
		{"/files/a%26b", "/files/a%26b", "/files/a&b", true},
		{"/%77eb", "", "", false},
		{"/%77%65%62", "", "", false},
		{"/w%65b", "", "", false},
		{"/%57EB", "", "", false},
		{"//web", "", "", false},
		{"///network", "", "", false},
		{"/./web", "", "", false},
		{"/a/../web", "", "", false},
		{"/leds/../web", "", "", false},
		{"/%2e%2e/web", "", "", false},
		{"/%2E%2E/web", "", "", false},
		{"/leds/%2e%2e/web", "", "", false},
		{"/leds%2f..%2fweb", "", "", false},
		{"/%2fweb", "", "", false},
		{"/%2577eb", "", "", false},
		{"/%25%37%37eb", "", "", false},
		{"/web/", "", "", false},
		{"/network/", "", "", false},
		{"/web/.", "", "", false},
		{"/api/v1/../web", "", "", false},
		{"/api/v1//web", "", "", false},
		{"/api/v1/%77eb", "", "", false},
		{"/files/a%2fb", "", "", false},
		{"/files/my clip.mov", "", "", false},
		{"/files/a%20b%2", "", "", false},
		{"/files/%zz", "", "", false},
		{"/files/%20b%20", "/files/%20b%20", "/files/ b ", true},
		{"/files/a%20b%20/", "", "", false},
		{"/files/a%2a", "", "", false}, // '*' may be bare: the escape is not canonical
		{"/web\\x", "", "", false},
		{"/web%5c..%5cota", "", "", false},
		{"/web%00", "", "", false},
		{"/web\x00", "", "", false},
		{"/web#x", "", "", false},
		{"web", "", "", false},
		{"", "", "", false},
		{"/wéb", "", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			send, route, err := CanonicalBoardPath(tc.in)
			if !tc.ok {
				if !errors.Is(err, ErrBadPath) {
					t.Fatalf("CanonicalBoardPath(%q) = %q, %q, %v; want ErrBadPath", tc.in, send, route, err)
				}
				// Refused paths are allowed to no role.
				for _, m := range []string{"GET", "POST"} {
					if d := Authorize(Attributes{Who: Identity{Name: "a", Role: RoleAdmin}, Verb: VerbCall,
						Resource: ResBoardAPI, Method: m, Path: tc.in}); d.Allowed {
						t.Errorf("%s %q allowed to an admin: %s", m, tc.in, d.Reason)
					}
				}
				return
			}
			if err != nil || send != tc.send || route != tc.route {
				t.Fatalf("CanonicalBoardPath(%q) = %q, %q, %v; want %q, %q", tc.in, send, route, err, tc.send, tc.route)
			}
			// Canonical is a fixed point.
			if s2, r2, err := CanonicalBoardPath(send); err != nil || s2 != send || r2 != route {
				t.Errorf("again: %q, %q, %v", s2, r2, err)
			}
		})
	}
}

// TestOperatorCannotReadAdminPaths: every spelling of /web and /network
// an operator might send is refused to them (canonical ones by the
// policy, the rest as not canonical).
func TestOperatorCannotReadAdminPaths(t *testing.T) {
	op := Identity{Name: "op", Role: RoleOperator}
	for _, p := range []string{"/web", "/network", "/web/trusted", "/%77eb", "//web", "/./web", "/a/../web",
		"/%2e%2e/web", "/%2577eb", "/web/", "/network/", "/api/v1/web", "/api/v1/%77eb", "/Web/../web", "/web?x=1"} {
		d := Authorize(Attributes{Who: op, Verb: VerbCall, Resource: ResBoardAPI, Method: "GET", Path: p})
		if d.Allowed {
			t.Errorf("operator GET %q allowed: %s", p, d.Reason)
		}
	}
	if d := Authorize(Attributes{Who: op, Verb: VerbCall, Resource: ResBoardAPI, Method: "GET", Path: "/leds"}); !d.Allowed {
		t.Errorf("operator GET /leds refused: %s", d.Reason)
	}
}
