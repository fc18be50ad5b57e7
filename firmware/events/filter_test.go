package events

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var filterVectors = []struct {
	in   string
	want []string // nil: all
	err  error
}{
	{"", nil, nil},
	{"  ", nil, nil},
	{"touch", []string{"touch"}, nil},
	{"touch,leds", []string{"leds", "touch"}, nil},
	{" touch , leds ", []string{"leds", "touch"}, nil},
	{"touch,touch", []string{"touch"}, nil},
	{"link,no_such_kind_yet", []string{"link", "no_such_kind_yet"}, nil},
	{"x_123456789_123456789_123456789_", []string{"x_123456789_123456789_123456789_"}, nil},
	{"x_123456789_123456789_123456789_1", nil, ErrBadFilter},
	{"touch,", nil, ErrBadFilter},
	{",touch", nil, ErrBadFilter},
	{"touch,,leds", nil, ErrBadFilter},
	{"Touch", nil, ErrBadFilter},
	{"clip-started", nil, ErrBadFilter},
	{"a b", nil, ErrBadFilter},
	{"touch\n", []string{"touch"}, nil},
	{"tö", nil, ErrBadFilter},
	{"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,a1,b1,c1,d1,e1,f1", []string{"a", "a1", "b", "b1", "c", "c1", "d", "d1", "e", "e1", "f", "f1", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z"}, nil},
	{"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,a1,b1,c1,d1,e1,f1,g1", nil, ErrBadFilter},
}

func TestParseFilter(t *testing.T) {
	for _, tt := range filterVectors {
		f, err := ParseFilter(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("ParseFilter(%q) err = %v; want %v", tt.in, err, tt.err)
			continue
		}
		if diff := cmp.Diff(f.Kinds(), tt.want); diff != "" {
			t.Errorf("ParseFilter(%q) (-got +want)\n%s", tt.in, diff)
		}
		if err == nil && f.All() != (tt.want == nil) {
			t.Errorf("ParseFilter(%q).All() = %v", tt.in, f.All())
		}
	}
	f := FilterOf("touch", "leds")
	if !f.Match("touch") || f.Match("screen") || !(Filter{}).Match("anything") {
		t.Error("Match")
	}
	if f.String() != "leds,touch" || (Filter{}).String() != "" {
		t.Errorf("String = %q", f.String())
	}
}

var afterVectors = []struct {
	in   string
	want uint16
	err  error
}{
	{"0", 0, nil},
	{"1", 1, nil},
	{"65535", 65535, nil},
	{"00042", 42, nil},
	{"65536", 0, ErrBadAfter},
	{"99999", 0, ErrBadAfter},
	{"000001", 0, ErrBadAfter},
	{"", 0, ErrBadAfter},
	{"-1", 0, ErrBadAfter},
	{"+1", 0, ErrBadAfter},
	{" 1", 0, ErrBadAfter},
	{"1.0", 0, ErrBadAfter},
	{"0x10", 0, ErrBadAfter},
	{"abc", 0, ErrBadAfter},
}

func TestParseAfter(t *testing.T) {
	for _, tt := range afterVectors {
		got, err := ParseAfter(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("ParseAfter(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParseQuery checks the kinds and after parsers never panic, accept
// only what they document, and round-trip through their canonical forms;
// and that the handler's query reading agrees with them.
func FuzzParseQuery(f *testing.F) {
	for _, v := range filterVectors {
		f.Add(v.in, "1")
	}
	for _, v := range afterVectors {
		f.Add("touch", v.in)
	}
	f.Fuzz(func(t *testing.T, kinds, after string) {
		flt, err := ParseFilter(kinds)
		if err == nil {
			for _, k := range flt.Kinds() {
				if !validKind(k) || !flt.Match(k) {
					t.Fatalf("ParseFilter(%q) holds bad kind %q", kinds, k)
				}
			}
			back, err := ParseFilter(flt.String())
			if err != nil {
				t.Fatalf("ParseFilter(String()) of %q: %v", kinds, err)
			}
			if diff := cmp.Diff(back.Kinds(), flt.Kinds()); diff != "" {
				t.Fatalf("round trip of %q (-got +want)\n%s", kinds, diff)
			}
		} else if !errors.Is(err, ErrBadFilter) {
			t.Fatalf("ParseFilter(%q) err %v", kinds, err)
		}

		a, err := ParseAfter(after)
		if err == nil {
			back, err := ParseAfter(strconv.Itoa(int(a)))
			if err != nil || back != a {
				t.Fatalf("ParseAfter round trip of %q: %d, %v", after, back, err)
			}
		} else if !errors.Is(err, ErrBadAfter) {
			t.Fatalf("ParseAfter(%q) err %v", after, err)
		}

		// The handler's reading of the same values, via the URL and via
		// Last-Event-ID.
		q := url.Values{"kinds": {kinds}, "after": {after}}
		req := &http.Request{URL: &url.URL{RawQuery: q.Encode()}, Header: http.Header{}}
		gf, ga, gerr := parseQuery(req)
		if gerr == nil {
			if ga == nil {
				t.Fatalf("after %q lost", after)
			}
			if pa, err := ParseAfter(after); err != nil || pa != *ga {
				t.Fatalf("parseQuery after %q = %d; ParseAfter %d, %v", after, *ga, pa, err)
			}
			if pf, err := ParseFilter(kinds); err != nil || pf.String() != gf.String() {
				t.Fatalf("parseQuery kinds %q = %q; ParseFilter %q, %v", kinds, gf, pf, err)
			}
		}
		req.Header.Set("Last-Event-ID", after)
		_, _, _ = parseQuery(req)
	})
}
