package console

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var parseTests = []struct {
	name string
	in   string
	want Line
	err  error
}{
	{"empty", "", Line{}, nil},
	{"blanks", " \t ", Line{}, nil},
	{"comment", "# leds off", Line{}, nil},
	{"indented comment", "  #x", Line{}, nil},
	{"hash later is a word", "sites add #x", Line{Words: []string{"sites", "add", "#x"}}, nil},
	{"one word", "info", Line{Words: []string{"info"}}, nil},
	{"cr dropped", "info\r", Line{Words: []string{"info"}}, nil},
	{"spaces and tabs", "  leds\trainbow   brightness 40 ", Line{Words: []string{"leds", "rainbow", "brightness", "40"}}, nil},
	{"json flag", "info --json", Line{Words: []string{"info"}, JSON: true}, nil},
	{"json flag first", "--json wifi scan", Line{Words: []string{"wifi", "scan"}, JSON: true}, nil},
	{"quoted json flag is a word", `password set "--json"`, Line{Words: []string{"password", "set", "--json"}}, nil},
	{"double quotes", `wifi join "Stage Left" "pass word"`, Line{Words: []string{"wifi", "join", "Stage Left", "pass word"}}, nil},
	{"escapes", `password set "a\"b\\c"`, Line{Words: []string{"password", "set", `a"b\c`}}, nil},
	{"other backslash kept", `password set "a\nb"`, Line{Words: []string{"password", "set", `a\nb`}}, nil},
	{"single quotes literal", `password set 'a"b\'`, Line{Words: []string{"password", "set", `a"b\`}}, nil},
	{"joined parts", `wifi join ab"c d"e`, Line{Words: []string{"wifi", "join", "abc de"}}, nil},
	{"empty quoted word", `wifi join ""`, Line{Words: []string{"wifi", "join", ""}}, nil},
	{"utf8", "wifi join café", Line{Words: []string{"wifi", "join", "café"}}, nil},
	{"open double quote", `wifi join "Stage`, Line{}, ErrQuote},
	{"open single quote", `wifi join 'Stage`, Line{}, ErrQuote},
	{"escaped final quote", `wifi join "a\"`, Line{}, ErrQuote},
	{"control char", "info\x01", Line{}, ErrControl},
	{"nul", "in\x00fo", Line{}, ErrControl},
	{"del", "info\x7f", Line{}, ErrControl},
	{"bad utf8", "wifi join \xff", Line{}, ErrControl},
	{"too long", "x " + strings.Repeat("a", MaxLine), Line{}, ErrTooLong},
	{"longest", strings.Repeat("a", MaxLine), Line{Words: []string{strings.Repeat("a", MaxLine)}}, nil},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Parse(%q) error %v, want %v", tt.in, err, tt.err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(got, tt.want, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Parse(%q) (-got +want):\n%s", tt.in, diff)
			}
			again, err := Parse(got.String())
			if err != nil || !sameLine(again, got) {
				t.Errorf("Parse(%q).String() = %q reads back as %+v, %v", tt.in, got.String(), again, err)
			}
		})
	}
}

func sameLine(a, b Line) bool {
	return cmp.Equal(a, b, cmpopts.EquateEmpty())
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		back := l.String()
		if len(back) > MaxLine*2+16 {
			return // quoting may grow a line past MaxLine
		}
		again, err := Parse(back)
		if len(back) > MaxLine {
			return
		}
		if err != nil || !sameLine(again, l) {
			t.Fatalf("Parse(%q) = %+v; String %q reads back as %+v, %v", s, l, back, again, err)
		}
	})
}

func TestLineReader(t *testing.T) {
	in := "info\r\nleds\rwifi\n\nx" + strings.Repeat("y", MaxLine+5) + "\nlast"
	lr := lineReader{br: newReader(in)}
	type got struct {
		Line    string
		TooLong bool
	}
	var lines []got
	for {
		l, tl, err := lr.next()
		if err != nil {
			break
		}
		if tl {
			l = l[:1]
		}
		lines = append(lines, got{l, tl})
	}
	want := []got{{"info", false}, {"leds", false}, {"wifi", false}, {"", false}, {"x", true}, {"last", false}}
	if diff := cmp.Diff(lines, want); diff != "" {
		t.Errorf("lines (-got +want):\n%s", diff)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(`wifi join "Stage Left" s3cretpass --json`); err != nil {
			b.Fatal(err)
		}
	}
}
