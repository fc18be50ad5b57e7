package osc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, addr string
		want          bool
	}{
		{"/holo/board/b1", "/holo/board/b1", true},
		{"/holo/board/b1", "/holo/board/b2", false},
		{"/holo/board/*", "/holo/board/b2", true},
		{"/holo/*", "/holo/board/b2", false}, // * does not cross /
		{"/holo/board/*/leds", "/holo/board/x/leds", true},
		{"/a/b?", "/a/b1", true},
		{"/a/b?", "/a/b", false},
		{"/a/[123]", "/a/2", true},
		{"/a/[1-3]", "/a/3", true},
		{"/a/[1-3]", "/a/4", false},
		{"/a/[3-1]", "/a/2", true}, // reversed range
		{"/a/[!1-3]", "/a/4", true},
		{"/a/[!1-3]", "/a/2", false},
		{"/a/[-a]", "/a/-", true},
		{"/a/{foo,bar}", "/a/bar", true},
		{"/a/{foo,bar}", "/a/baz", false},
		{"/a/{foo,fo}o", "/a/foo", true}, // the second alternative
		{"/a/*x", "/a/xxx", true},
		{"/a/*", "/a/", true},
		{"/a/[12", "/a/1", false}, // malformed
		{"/a/{1", "/a/1", false},
		{"/a/1]", "/a/1]", false},
		{"/a/b", "/a/b/c", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.addr); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.addr, got, tt.want)
		}
	}
}

func TestMatchManyStarsIsFast(t *testing.T) {
	p := "/" + strings.Repeat("*a", 60) + "b"
	a := "/" + strings.Repeat("a", 200)
	start := time.Now()
	if Match(p, a) {
		t.Fatal("matched")
	}
	// Backtracking over 60 stars would take years; a bound far above a
	// loaded machine under -race (2 s seen) catches it without flaking.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestCheckPattern(t *testing.T) {
	for _, p := range []string{"/a/*", "/a/[1-3]/{x,y}"} {
		if err := CheckPattern(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"a", "/a/[1", "/a/{x"} {
		if err := CheckPattern(p); !errors.Is(err, ErrBadPattern) {
			t.Errorf("%q: %v", p, err)
		}
	}
}
