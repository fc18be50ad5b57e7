package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/frame"
)

// doSetup: line0 holds b1-b4 (group 1) and b5 (group 2); line1 holds b6,
// b7 (group 1); b8 (group 1) and b9 (group 2) are on the LAN only; b10
// (group 1) is on line0 and the LAN.
func doSetup(t *testing.T) (*setup, *fakeLine) {
	t.Helper()
	line1 := newFakeLine("rs485:line1")
	s := newSetup(t, Options{Drivers: []Driver{line1}})
	<-line1.ready
	for i := 1; i <= 5; i++ {
		g := 1
		if i == 5 {
			g = 2
		}
		s.plug(t, &fakeBoard{id: fmt.Sprintf("b%02d", i), groups: []int{g}}, fmt.Sprint(i), "")
	}
	for i := 6; i <= 7; i++ {
		b := &fakeBoard{id: fmt.Sprintf("b%02d", i), groups: []int{1}}
		line1.put(fmt.Sprint(i), b)
		s.f.Seen(Ref{Driver: "rs485:line1", Addr: fmt.Sprint(i)}, b.info())
		eventually(t, "groups", func() bool { v, _ := s.f.Board(b.id); return len(v.Groups) == 1 })
	}
	s.plug(t, &fakeBoard{id: "b08", groups: []int{1}}, "", "http://b08")
	s.plug(t, &fakeBoard{id: "b09", groups: []int{2}}, "", "http://b09")
	s.plug(t, &fakeBoard{id: "b10", groups: []int{1}}, "10", "http://b10")
	return s, line1
}

func TestDoGroupFrames(t *testing.T) {
	s, line1 := doSetup(t)
	ctx := context.Background()

	res, err := s.f.Do(ctx, Selector{Groups: []int{1}}, Action{Kind: ActionSceneApply, Body: []byte(`{"slot":4}`)})
	if err != nil {
		t.Fatal(err)
	}
	scene := frame.SceneRequest{Slot: 4}
	if diff := cmp.Diff(s.line.takeSent(), []groupSent{{Group: 1, Native: scene}}); diff != "" {
		t.Errorf("line0 (-got +want)\n%s", diff)
	}
	if diff := cmp.Diff(line1.takeSent(), []groupSent{{Group: 1, Native: scene}}); diff != "" {
		t.Errorf("line1 (-got +want)\n%s", diff)
	}
	if diff := cmp.Diff(s.lan.takeCalls(), []call{{"http://b08", "POST", "/scenes/apply", `{"slot":4}`}}); diff != "" {
		t.Errorf("LAN (-got +want)\n%s", diff)
	}
	var via []string
	for _, r := range res {
		via = append(via, r.Board+" "+r.Via)
		if r.Error != "" {
			t.Errorf("%s: %s", r.Board, r.Error)
		}
	}
	want := []string{"b01 group", "b02 group", "b03 group", "b04 group", "b06 group", "b07 group", "b08 lan", "b10 group"}
	if diff := cmp.Diff(via, want); diff != "" {
		t.Errorf("results (-got +want)\n%s", diff)
	}

	// A scene by name has no native form: one JSON line per line.
	if _, err := s.f.Do(ctx, Selector{Groups: []int{1}}, Action{Kind: ActionSceneApply, Body: []byte(`{"name":"intro"}`)}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.line.takeSent(), []groupSent{{Group: 1, Method: "POST", Path: "/scenes/apply", Body: `{"name":"intro"}`}}); diff != "" {
		t.Errorf("line0 JSON line (-got +want)\n%s", diff)
	}
	line1.takeSent()
	s.lan.takeCalls()

	// All: one broadcast frame per line, the LAN-only boards one by one.
	res, err = s.f.Do(ctx, Selector{All: true}, Action{Kind: ActionSceneEnd})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.line.takeSent(), []groupSent{{Group: 0, Native: frame.EndRequest{}}}); diff != "" {
		t.Errorf("line0 all (-got +want)\n%s", diff)
	}
	if diff := cmp.Diff(line1.takeSent(), []groupSent{{Group: 0, Native: frame.EndRequest{}}}); diff != "" {
		t.Errorf("line1 all (-got +want)\n%s", diff)
	}
	if n := len(s.lan.takeCalls()); n != 2 || len(res) != 10 {
		t.Errorf("all: %d LAN calls (want 2), %d results (want 10)", n, len(res))
	}

	// Explicit boards: each called, over the line for link paths.
	res, err = s.f.Do(ctx, Selector{Boards: []string{"b05", "b09"}}, Action{Kind: ActionLEDs, Body: []byte(`{"mode":"off","loop":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.line.takeSent()) != 0 || len(s.line.takeCalls()) != 1 || len(s.lan.takeCalls()) != 1 {
		t.Error("explicit boards were not called one by one")
	}
	if len(res) != 2 || res[0].Via != ViaRS485 || res[1].Via != ViaLAN || res[0].Reply.Status != 200 {
		t.Errorf("explicit results %+v", res)
	}

	// Labels: the boards carrying them, one by one.
	if _, err := s.f.SetLabels("b03", map[string]string{"stage": "left"}); err != nil {
		t.Fatal(err)
	}
	res, err = s.f.Do(ctx, Selector{Labels: map[string]string{"stage": "left"}}, Action{Kind: ActionScreenOff})
	if err != nil || len(res) != 1 || res[0].Board != "b03" || res[0].Via != ViaRS485 {
		t.Errorf("labels: %+v %v", res, err)
	}
	s.line.takeCalls()

	for _, tc := range []struct {
		name string
		sel  Selector
		a    Action
		err  error
	}{
		{"empty selector", Selector{}, Action{Kind: ActionSceneEnd}, ErrBadSelector},
		{"group 0", Selector{Groups: []int{0}}, Action{Kind: ActionSceneEnd}, ErrBadSelector},
		{"group 32", Selector{Groups: []int{32}}, Action{Kind: ActionSceneEnd}, ErrBadSelector},
		{"empty group", Selector{Groups: []int{9}}, Action{Kind: ActionSceneEnd}, ErrUnknownGroup},
		{"unknown board", Selector{Boards: []string{"zz"}}, Action{Kind: ActionSceneEnd}, ErrUnknownBoard},
		{"unknown kind", Selector{All: true}, Action{Kind: "explode"}, ErrBadAction},
		{"bad body", Selector{All: true}, Action{Kind: ActionLEDs, Body: []byte(`{"mode":`)}, ErrBadAction},
		// Group frames carry no reply: a body a board would refuse must
		// be refused before it is sent.
		{"unknown mode to a group", Selector{Groups: []int{1}}, Action{Kind: ActionLEDs, Body: []byte(`{"mode":"sparkle"}`)}, ErrBadAction},
		{"brightness 0 to a group", Selector{Groups: []int{1}}, Action{Kind: ActionLEDs, Body: []byte(`{"brightness":0,"loop":true}`)}, ErrBadAction},
		{"unknown field to all", Selector{All: true}, Action{Kind: ActionLEDs, Body: []byte(`{"speed":3,"loop":true}`)}, ErrBadAction},
		{"bad motion to a group", Selector{Groups: []int{2}}, Action{Kind: ActionHolo, Body: []byte(`{"motion":"spin"}`)}, ErrBadAction},
		{"slot 0 to a group", Selector{Groups: []int{1}}, Action{Kind: ActionSceneApply, Body: []byte(`{"slot":0}`)}, ErrBadAction},
		{"show two things", Selector{Groups: []int{1}}, Action{Kind: ActionScreenShow, Body: []byte(`{"colour":"red","path":"/a.png"}`)}, ErrBadAction},
		{"body on scene end", Selector{Boards: []string{"b08"}}, Action{Kind: ActionSceneEnd, Body: []byte(`{"now":true}`)}, ErrBadAction},
	} {
		if _, err := s.f.Do(ctx, tc.sel, tc.a); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if len(s.line.takeSent())+len(line1.takeSent())+len(s.lan.takeCalls())+len(s.line.takeCalls()) != 0 {
		t.Error("a refused action reached a board")
	}
}

// TestDoNativeForms: the group frame is the body's native form when it has
// one (package action derives it), else one JSON line of the body.
func TestDoNativeForms(t *testing.T) {
	s, line1 := doSetup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		a    Action
		want groupSent
	}{
		{Action{Kind: ActionLEDs, Body: []byte(`{"mode":"solid","colour":"#010203","brightness":40,"loop":false}`)},
			groupSent{Group: 2, Native: frame.LEDsRequest{Mode: frame.LEDSolid, R: 1, G: 2, B: 3, Brightness: 40, Flags: frame.LEDNewColour}}},
		{Action{Kind: ActionLEDs, Body: []byte(`{"mode":"solid"}`)},
			groupSent{Group: 2, Method: "PATCH", Path: "/leds", Body: `{"mode":"solid"}`}},
		{Action{Kind: ActionHolo, Body: []byte(`{"motion":"move","x":0.25,"y":-1}`)},
			groupSent{Group: 2, Native: frame.HoloRequest{Motion: frame.MotionMove, X: 25, Y: -100}}},
		{Action{Kind: ActionHolo, Body: []byte(`{"motion":"scan","interval_s":[1,2]}`)},
			groupSent{Group: 2, Method: "POST", Path: "/holo/motion", Body: `{"motion":"scan","interval_s":[1,2]}`}},
		{Action{Kind: ActionScreenShow, Body: []byte(`{"colour":"10,20,30"}`)},
			groupSent{Group: 2, Native: frame.ColourRequest{R: 10, G: 20, B: 30}}},
		{Action{Kind: ActionScreenOff}, groupSent{Group: 2, Native: frame.ScreenOffRequest{}}},
	} {
		res, err := s.f.Do(ctx, Selector{Groups: []int{2}}, tc.a)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.a.Kind, tc.a.Body, err)
		}
		if diff := cmp.Diff(s.line.takeSent(), []groupSent{tc.want}); diff != "" {
			t.Errorf("%s %s (-got +want)\n%s", tc.a.Kind, tc.a.Body, diff)
		}
		if len(res) != 2 || res[0].Board != "b05" || res[0].Via != ViaGroup || res[0].Error != "" {
			t.Errorf("%s %s: results %+v", tc.a.Kind, tc.a.Body, res)
		}
	}
	line1.takeSent()
	s.lan.takeCalls()
}

// TestDoBoardRefusal: a board that refuses an action reports its code in
// Error and its message in Message, as it sent them.
func TestDoBoardRefusal(t *testing.T) {
	s, _ := doSetup(t)
	s.lan.put("http://b09", &fakeBoard{id: "b09", groups: []int{2},
		reply: &Reply{Status: 404, Body: []byte(`{"error":"unknown_scene","message":"no scene is called \"intro\""}`)}})
	res, err := s.f.Do(context.Background(), Selector{Boards: []string{"b09", "b08"}}, Action{Kind: ActionSceneApply, Body: []byte(`{"name":"intro"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Board: "b08", Via: ViaLAN, Reply: Reply{Status: 200, Body: []byte(`{"ok":true}`)}},
		{Board: "b09", Via: ViaLAN, Reply: Reply{Status: 404, Body: []byte(`{"error":"unknown_scene","message":"no scene is called \"intro\""}`)},
			Error: "unknown_scene", Message: `no scene is called "intro"`},
	}
	if diff := cmp.Diff(res, want); diff != "" {
		t.Errorf("results (-got +want)\n%s", diff)
	}
}
