package installation

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/gateway/fleet"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestParseGolden parses every file of testdata/parse: good-* must parse
// and round-trip through their canonical JSON; bad-* must be refused with
// exactly the errors of their .err golden file.
func TestParseGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/parse/*.*")
	for _, f := range files {
		if strings.HasSuffix(f, ".err") {
			continue
		}
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Parse(name, data)
			if strings.HasPrefix(name, "good-") {
				if err != nil {
					t.Fatal(err)
				}
				again, err := Parse("json", d.JSON())
				if err != nil {
					t.Fatalf("canonical JSON does not parse again: %v\n%s", err, d.JSON())
				}
				if diff := cmp.Diff(string(d.JSON()), string(again.JSON())); diff != "" {
					t.Errorf("round trip (-first +second):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			golden := strings.TrimSuffix(f, filepath.Ext(f)) + ".err"
			got := err.Error() + "\n"
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, _ := os.ReadFile(golden)
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/parse/*.*")
	for _, fn := range files {
		if b, err := os.ReadFile(fn); err == nil && !strings.HasSuffix(fn, ".err") {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz.yaml", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		again, err := Parse("json", d.JSON())
		if err != nil {
			t.Fatalf("accepted, but its canonical JSON is refused: %v\n%s", err, d.JSON())
		}
		if !bytes.Equal(d.JSON(), again.JSON()) {
			t.Fatalf("canonical JSON changes on a round trip:\n%s\n%s", d.JSON(), again.JSON())
		}
	})
}

func TestResolve(t *testing.T) {
	data, _ := os.ReadFile("testdata/parse/good-demo.yaml")
	d, err := Parse("demo.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		view    fleet.BoardView
		profile string
		ok      bool
		check   func(t *testing.T, tg Target)
	}{
		{"group 1", fleet.BoardView{ID: "b1", Groups: []int{1}}, "stage-left", true, func(t *testing.T, tg Target) {
			if c := tg.Servos["pan"].Calibration; c == nil || c.MinUS != 1000 {
				t.Errorf("calibration %+v, want the profile's", c)
			}
			if got := tg.Dirs(); !cmp.Equal(got, []string{"/clips", "/images"}) {
				t.Errorf("dirs %v", got)
			}
		}},
		{"group 2", fleet.BoardView{ID: "b2", Groups: []int{2}}, "stage-right", true, nil},
		{"no group", fleet.BoardView{ID: "b3"}, "", false, nil},
		{"a board's own calibration", fleet.BoardView{ID: "0a1b2c3d4e5f", Groups: []int{1}}, "stage-left", true, func(t *testing.T, tg Target) {
			if c := tg.Servos["pan"].Calibration; c == nil || c.MinUS != 1010 || c.MaxUS != 1990 {
				t.Errorf("calibration %+v, want the board's own", c)
			}
			if p := tg.Servos["pan"].Policy; p == nil || !p.HoldBetween {
				t.Errorf("policy %+v, want the profile's kept", p)
			}
		}},
		{"line address values", fleet.BoardView{ID: "b7", Line: "line0", Address: 7, Groups: []int{2}}, "stage-right", true, func(t *testing.T, tg Target) {
			if tg.Link == nil || !cmp.Equal(tg.Link.Groups, []int{2, 5}) {
				t.Errorf("link %+v", tg.Link)
			}
		}},
		{"both groups conflict", fleet.BoardView{ID: "b9", Groups: []int{1, 2}}, "", false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg, ok, err := d.Resolve(tc.view)
			if tc.name == "both groups conflict" {
				if !errors.Is(err, ErrConflict) {
					t.Fatalf("err %v, want ErrConflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok || tg.Profile != tc.profile {
				t.Fatalf("got %q %v, want %q %v", tg.Profile, ok, tc.profile, tc.ok)
			}
			if tc.check != nil {
				tc.check(t, tg)
			}
		})
	}
}

func TestCheckBoardPath(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"/a.png", true}, {"/clips/intro.mov", true}, {"/", false}, {"a.png", false}, {"/a//b", false},
		{"/a/../b", false}, {"/a/./b", false}, {"/a/", false}, {"/x.part", false},
		{"/" + strings.Repeat("a", 64), false}, {"/" + strings.Repeat("a/", 80) + "b", false},
	} {
		if err := CheckBoardPath(tc.p); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

// TestDocsExample: the example of docs/installation.md parses and its
// content files load.
func TestDocsExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/examples/installation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse("installation.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenContents(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(d, "../../docs/examples"); err != nil {
		t.Fatal(err)
	}
	for name, ct := range d.Content {
		if ct.Size == 0 || len(ct.SHA256) != 64 {
			t.Errorf("content %s: %+v", name, ct)
		}
	}
	left, ok, err := d.Resolve(fleet.BoardView{ID: "b1", Address: 1, Groups: []int{1}})
	if err != nil || !ok || left.Profile != "stage-left" || len(left.Scenes) != 2 {
		t.Fatalf("board 1: %+v %v %v", left, ok, err)
	}
}
