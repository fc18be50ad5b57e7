package layout

import (
	"errors"
	"strings"
	"testing"
)

// TestValidName: which board names may stand in topics, and the name a
// hostname gives.
func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"holo-29f3", true}, {"stage_left.1", true}, {"ümlaut", true}, {strings.Repeat("a", 64), true},
		{"", false}, {strings.Repeat("a", 65), false}, {"a+b", false}, {"a#", false}, {"a/b", false},
		{"$SYS", false}, {"bridge", false}, {"group", false}, {"a b", false}, {"a\x00b", false}, {"\xff", false},
	} {
		err := ValidName(tc.name)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrBadName) {
			t.Errorf("ValidName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	for in, want := range map[string]string{"holo-1": "holo-1", "a b/c": "a_b_c", "$$x": "x", "bridge": "", "": ""} {
		if got := DefaultName(in); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTopics: the names of the topics, alone and in a cluster.
func TestTopics(t *testing.T) {
	alone := Topics{Base: "holo", HA: "homeassistant"}
	hall := Topics{Base: "show/holo", HA: "ha", Gateway: "hall"}
	for _, tc := range []struct{ got, want string }{
		{alone.Own("state"), "holo/bridge/state"},
		{hall.Own("state"), "show/holo/bridge/gateway/hall/state"},
		{alone.Board("b1", LevelAvail), "holo/b1/availability"},
		{alone.Event("b1", "touch"), "holo/b1/event/touch"},
		{alone.BoardSet("b1", "leds"), "holo/b1/set/leds"},
		{alone.Response(VerbDo), "holo/bridge/response/do"},
		{alone.Discovery("02:ab"), "homeassistant/device/holo_02_ab/config"},
		{hall.GatewayDiscovery("hall"), "ha/device/holo-gw_hall/config"},
		{hall.HAStatus(), "ha/status"},
		{hall.SetFilter(), "show/holo/+/set/+"},
		{hall.GroupFilter(), "show/holo/group/+/set/+"},
		{hall.RequestFilter(), "show/holo/bridge/request/+"},
		{hall.PeerFilter("boards"), "show/holo/bridge/gateway/+/boards"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
	if gw, leaf, ok := hall.PeerOf("show/holo/bridge/gateway/yard/boards"); !ok || gw != "yard" || leaf != "boards" {
		t.Errorf("PeerOf: %q %q %v", gw, leaf, ok)
	}
	if _, _, ok := hall.PeerOf("show/holo/bridge/gateway/yard/a/b"); ok {
		t.Error("PeerOf took a deeper topic")
	}
	if err := CheckRoots("holo", "ha/x"); err != nil {
		t.Errorf("CheckRoots: %v", err)
	}
	for _, bad := range [][2]string{{"", "ha"}, {"holo/+", "ha"}, {"holo", "$ha"}, {"holo//x", "ha"}} {
		if err := CheckRoots(bad[0], bad[1]); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckRoots(%q, %q) = %v, want ErrBadName", bad[0], bad[1], err)
		}
	}
}
