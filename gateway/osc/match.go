package osc

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadPattern: an address pattern with an unclosed [ or {, or a part
// longer than MaxPartLen.
var ErrBadPattern = errors.New("osc: bad address pattern")

// MaxPartLen bounds one part (between slashes) of a pattern or address
// that Match looks at; longer parts never match.
const MaxPartLen = 256

// Match reports whether the OSC 1.0 address pattern matches address, part
// by part (a wildcard never crosses a '/'): ? is any one character, * any
// run of characters, [abc] one of them ([a-z] a range, [!...] none of
// them), {foo,bar} one of the strings. A malformed pattern matches
// nothing.
func Match(pattern, address string) bool {
	pp := strings.Split(pattern, "/")
	ap := strings.Split(address, "/")
	if len(pp) != len(ap) {
		return false
	}
	for i := range pp {
		if !MatchPart(pp[i], ap[i]) {
			return false
		}
	}
	return true
}

// MatchPart matches one part of a pattern against one part of an
// address (neither holding '/').
func MatchPart(pattern, s string) bool {
	if len(pattern) > MaxPartLen || len(s) > MaxPartLen {
		return false
	}
	m := matcher{p: pattern, s: s, failed: make([]bool, (len(pattern)+1)*(len(s)+1))}
	return m.match(0, 0)
}

// CheckPattern returns ErrBadPattern (wrapped) when p is malformed.
func CheckPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: %q does not start with /", ErrBadPattern, p)
	}
	for part := range strings.SplitSeq(p, "/") {
		if len(part) > MaxPartLen {
			return fmt.Errorf("%w: a part longer than %d", ErrBadPattern, MaxPartLen)
		}
		for i := 0; i < len(part); i++ {
			switch part[i] {
			case '[':
				j := strings.IndexByte(part[i+1:], ']')
				if j < 0 {
					return fmt.Errorf("%w: unclosed [ in %q", ErrBadPattern, part)
				}
				i += j + 1
			case '{':
				j := strings.IndexByte(part[i+1:], '}')
				if j < 0 {
					return fmt.Errorf("%w: unclosed { in %q", ErrBadPattern, part)
				}
				i += j + 1
			}
		}
	}
	return nil
}

// IsPattern reports whether s holds any pattern character.
func IsPattern(s string) bool { return strings.ContainsAny(s, "*?[]{}") }

type matcher struct {
	p, s   string
	failed []bool // (pi, si) already known not to match: keeps * linear-ish
}

func (m *matcher) match(pi, si int) bool {
	key := pi*(len(m.s)+1) + si
	if m.failed[key] {
		return false
	}
	ok := m.step(pi, si)
	if !ok {
		m.failed[key] = true
	}
	return ok
}

func (m *matcher) step(pi, si int) bool {
	p, s := m.p, m.s
	if pi == len(p) {
		return si == len(s)
	}
	switch p[pi] {
	case '*':
		for k := si; k <= len(s); k++ {
			if m.match(pi+1, k) {
				return true
			}
		}
		return false
	case '?':
		return si < len(s) && m.match(pi+1, si+1)
	case '[':
		end := strings.IndexByte(p[pi+1:], ']')
		if end < 0 || si >= len(s) {
			return false
		}
		set := p[pi+1 : pi+1+end]
		if !inSet(set, s[si]) {
			return false
		}
		return m.match(pi+end+2, si+1)
	case '{':
		end := strings.IndexByte(p[pi+1:], '}')
		if end < 0 {
			return false
		}
		next := pi + end + 2
		for alt := range strings.SplitSeq(p[pi+1:pi+1+end], ",") {
			if strings.HasPrefix(s[si:], alt) && m.match(next, si+len(alt)) {
				return true
			}
		}
		return false
	case ']', '}':
		return false // a stray closer: malformed, matches nothing
	}
	return si < len(s) && s[si] == p[pi] && m.match(pi+1, si+1)
}

// inSet reports whether c is in the bracket set (without its brackets):
// characters and ranges a-z, negated by a leading '!'. A '-' first or last
// is itself.
func inSet(set string, c byte) bool {
	neg := false
	if strings.HasPrefix(set, "!") {
		neg, set = true, set[1:]
	}
	in := false
	for i := 0; i < len(set); i++ {
		if i+2 < len(set) && set[i+1] == '-' {
			lo, hi := set[i], set[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if c >= lo && c <= hi {
				in = true
			}
			i += 2
			continue
		}
		if set[i] == c {
			in = true
		}
	}
	return in != neg
}
