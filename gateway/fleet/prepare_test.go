package fleet

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/action"
)

// TestPrepare: a body, a selector and a moment are checked in that order
// by the rules of prepare.go's table, with the fleet's typed errors.
func TestPrepare(t *testing.T) {
	now := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	leds := Action{Kind: ActionLEDs, Body: []byte(`{"mode":"solid","loop":true}`)}
	timed := func(a Action, at time.Time, lead time.Duration) Action { a.At, a.Lead = at, lead; return a }
	for _, tc := range []struct {
		name   string
		sel    Selector
		a      Action
		now    time.Time
		err    error
		inner  error
		at     time.Time
		timedP bool
	}{
		{name: "now", sel: Selector{Groups: []int{1}}, a: leds, now: now},
		{name: "group 31", sel: Selector{Groups: []int{31}}, a: leds, now: now},
		{name: "all", sel: Selector{All: true}, a: Action{Kind: ActionSceneEnd}, now: now},
		{name: "labels", sel: Selector{Labels: map[string]string{"stage": "left"}}, a: leds, now: now},
		{name: "lead resolved", sel: Selector{All: true}, a: timed(leds, time.Time{}, 250*time.Millisecond), now: now,
			at: now.Add(250 * time.Millisecond), timedP: true},
		{name: "moment", sel: Selector{All: true}, a: timed(leds, now.Add(time.Second), 0), now: now, at: now.Add(time.Second), timedP: true},
		{name: "lead without a clock", sel: Selector{All: true}, a: timed(leds, time.Time{}, time.Second), timedP: true},
		{name: "a moment far off without a clock", sel: Selector{All: true}, a: timed(leds, now.Add(time.Hour), 0),
			at: now.Add(time.Hour), timedP: true},

		{name: "unknown kind", sel: Selector{All: true}, a: Action{Kind: "explode"}, err: ErrBadAction, inner: action.ErrUnknownKind},
		{name: "bad body", sel: Selector{All: true}, a: Action{Kind: ActionLEDs, Body: []byte(`{"mode":"sparkle"}`)},
			err: ErrBadAction, inner: action.ErrInvalid},
		{name: "body before selector", sel: Selector{}, a: Action{Kind: ActionLEDs, Body: []byte(`{"mode":`)}, err: ErrBadAction},
		{name: "empty selector", sel: Selector{}, a: leds, err: ErrBadSelector},
		{name: "only except", sel: Selector{Except: []string{"b1"}}, a: leds, err: ErrBadSelector},
		{name: "group 0", sel: Selector{Groups: []int{0}}, a: leds, err: ErrBadSelector},
		{name: "group 32", sel: Selector{Groups: []int{1, 32}}, a: leds, err: ErrBadSelector},
		{name: "group -1", sel: Selector{Groups: []int{-1}}, a: leds, err: ErrBadSelector},
		{name: "selector before time", sel: Selector{Groups: []int{0}}, a: timed(leds, time.Time{}, -time.Second), err: ErrBadSelector},
		{name: "moment and lead", sel: Selector{All: true}, a: timed(leds, now, time.Second), err: ErrBadTime},
		{name: "negative lead", sel: Selector{All: true}, a: timed(leds, time.Time{}, -time.Millisecond), err: ErrBadTime},
		{name: "lead too long", sel: Selector{All: true}, a: timed(leds, time.Time{}, MaxFireLead+time.Millisecond), err: ErrBadTime},
		{name: "too far ahead", sel: Selector{All: true}, a: timed(leds, now.Add(MaxFireLead+time.Second), 0), now: now, err: ErrBadTime},
		{name: "too far past", sel: Selector{All: true}, a: timed(leds, now.Add(-MaxFirePast-time.Second), 0), now: now, err: ErrBadTime},
	} {
		p, err := Prepare(tc.sel, tc.a, tc.now)
		if tc.err != nil {
			if !errors.Is(err, tc.err) || tc.inner != nil && !errors.Is(err, tc.inner) {
				t.Errorf("%s: err %v, want %v (%v)", tc.name, err, tc.err, tc.inner)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(p.Kind()) != tc.a.Kind || !p.At.Equal(tc.at) || p.Timed() != tc.timedP {
			t.Errorf("%s: kind %s at %v timed %v, want %s %v %v", tc.name, p.Kind(), p.At, p.Timed(), tc.a.Kind, tc.at, tc.timedP)
		}
		if r := p.Resolved(); !tc.at.IsZero() && (!r.At.Equal(tc.at) || r.Lead != 0) {
			t.Errorf("%s: resolved %+v", tc.name, r)
		}
		if p.Action.Lead != tc.a.Lead || !p.Action.At.Equal(tc.a.At) || string(p.Action.Body) != string(tc.a.Body) {
			t.Errorf("%s: the action as given changed: %+v", tc.name, p.Action)
		}
	}
}

// TestCheckGroup: the spec's 1-31, nothing else.
func TestCheckGroup(t *testing.T) {
	for g := -2; g <= 40; g++ {
		err := CheckGroup(g)
		if ok := g >= 1 && g <= 31; ok != (err == nil) || err != nil && !errors.Is(err, ErrBadSelector) {
			t.Errorf("group %d: %v", g, err)
		}
	}
}

// TestOnlyPrepareDecodes walks the syntax of every Go file of the
// gateway and cmd/: no package but action itself names action.Decode,
// and in the fleet only Prepare does. Every surface that takes an action
// reaches the decoder through Prepare, so they cannot drift apart.
func TestOnlyPrepareDecodes(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const actionPath = "github.com/holofleet/holofleet/gateway/action"
	var uses []string
	fset := token.NewFileSet()
	for _, dir := range []string{"gateway", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			if filepath.Dir(rel) == filepath.Join("gateway", "action") {
				return nil // the decoder's own package
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, u := range decodeUses(f, actionPath) {
				if rel == filepath.Join("gateway", "fleet", "prepare.go") && u == "Prepare" {
					continue
				}
				uses = append(uses, rel+": "+u)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(uses) > 0 {
		t.Errorf("action.Decode is used outside fleet.Prepare (call fleet.Prepare instead):\n%s", strings.Join(uses, "\n"))
	}
}

// decodeUses lists the functions of f (or "file scope") that name the
// Decode of the package at importPath.
func decodeUses(f *ast.File, importPath string) []string {
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
			name = "action"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" || name == "_" {
		return nil
	}
	var out []string
	where := "file scope"
	for _, decl := range f.Decls {
		if fd, ok := decl.(*ast.FuncDecl); ok {
			where = fd.Name.Name
		} else {
			where = "file scope"
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Decode" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
				out = append(out, where)
			}
			return true
		})
	}
	return out
}

// TestDecodeUsesSeesACall: the walk finds a call, under another import
// name too (the check above would pass vacuously otherwise).
func TestDecodeUsesSeesACall(t *testing.T) {
	const src = `package x
import act "github.com/holofleet/holofleet/gateway/action"
var f = act.Decode
func g() { _, _ = act.Decode("leds", nil) }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeUses(f, "github.com/holofleet/holofleet/gateway/action"); strings.Join(got, ",") != "file scope,g" {
		t.Errorf("uses %v", got)
	}
}

// FuzzPrepare: any kind, body, groups and lead are prepared or refused
// with one of the three errors, never a panic; what is accepted names
// groups 1-31 only, and its body's request prepares again to the same
// request (the decoded value is what the board gets).
func FuzzPrepare(f *testing.F) {
	for _, s := range []struct {
		kind, body string
		group      int
		leadMS     int64
	}{
		{"leds", `{"mode":"solid","loop":true}`, 1, 0},
		{"scene_apply", `{"slot":3}`, 31, 250},
		{"holo", `{"motion":"move","x":0.5,"y":-1}`, 0, 0},
		{"screen_off", ``, 32, -1},
		{"explode", `{}`, 5, 60001},
		{"screen_show", `{"colour":"red","path":"/a"}`, 2, 10},
	} {
		f.Add(s.kind, []byte(s.body), s.group, s.leadMS)
	}
	now := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, kind string, body []byte, group int, leadMS int64) {
		sel := Selector{Groups: []int{group}}
		a := Action{Kind: kind, Body: body, Lead: time.Duration(leadMS) * time.Millisecond}
		p, err := Prepare(sel, a, now)
		if err != nil {
			if !errors.Is(err, ErrBadAction) && !errors.Is(err, ErrBadSelector) && !errors.Is(err, ErrBadTime) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if group < 1 || group > 31 {
			t.Fatalf("group %d accepted", group)
		}
		req := p.Body.Request()
		again, err := Prepare(sel, Action{Kind: kind, Body: req.Body}, now)
		if err != nil {
			t.Fatalf("the body's own request is refused: %s: %v", req.Body, err)
		}
		if r2 := again.Body.Request(); r2.Method != req.Method || r2.Path != req.Path || string(r2.Body) != string(req.Body) {
			t.Fatalf("request %+v prepares again as %+v", req, r2)
		}
	})
}
