package events

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Limits of the query values GET /events accepts.
const (
	// MaxKindLen is the longest kind name: 1 to 32 of a-z, 0-9 and _.
	MaxKindLen = 32
	// MaxFilterKinds is the most names one kinds list may hold.
	MaxFilterKinds = 32
)

// Filter selects event kinds. The zero Filter selects every kind. A kind the
// board does not know is accepted and simply matches nothing, so a client
// written for newer firmware still connects.
type Filter struct {
	kinds map[string]struct{} // nil: all
}

// FilterOf returns a Filter selecting the given kinds; none selects all.
func FilterOf(kinds ...string) Filter {
	if len(kinds) == 0 {
		return Filter{}
	}
	f := Filter{kinds: make(map[string]struct{}, len(kinds))}
	for _, k := range kinds {
		f.kinds[k] = struct{}{}
	}
	return f
}

// ParseFilter parses the kinds query value: a comma list of kind names. The
// empty string selects every kind. Spaces around a name are ignored; an empty
// name (",,", a trailing comma), a name with other characters than a-z, 0-9
// and _, a name over MaxKindLen bytes or more than MaxFilterKinds names
// give ErrBadFilter. Repeated names count once.
func ParseFilter(s string) (Filter, error) {
	if strings.TrimSpace(s) == "" {
		return Filter{}, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxFilterKinds {
		return Filter{}, fmt.Errorf("%w: more than %d kinds", ErrBadFilter, MaxFilterKinds)
	}
	f := Filter{kinds: make(map[string]struct{}, len(parts))}
	for _, p := range parts {
		k := strings.TrimSpace(p)
		if !validKind(k) {
			return Filter{}, fmt.Errorf("%w: %q is not a kind name (1-%d of a-z 0-9 _)", ErrBadFilter, k, MaxKindLen)
		}
		f.kinds[k] = struct{}{}
	}
	return f, nil
}

// All reports whether f selects every kind.
func (f Filter) All() bool { return f.kinds == nil }

// Match reports whether f selects kind.
func (f Filter) Match(kind string) bool {
	if f.kinds == nil {
		return true
	}
	_, ok := f.kinds[kind]
	return ok
}

// Kinds returns the selected kinds sorted, or nil when f selects all.
func (f Filter) Kinds() []string {
	if f.kinds == nil {
		return nil
	}
	out := make([]string, 0, len(f.kinds))
	for k := range f.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String returns the canonical kinds value: sorted names joined by commas,
// "" for all. ParseFilter(f.String()) selects the same kinds as f.
func (f Filter) String() string { return strings.Join(f.Kinds(), ",") }

// ParseAfter parses an after query value or a Last-Event-ID header: a
// decimal integer 0 to 65535 with nothing around it (at most 5 digits).
// 0 means before the first happening. Anything else gives ErrBadAfter.
func ParseAfter(s string) (uint16, error) {
	if len(s) == 0 || len(s) > 5 {
		return 0, fmt.Errorf("%w: %q is not an integer 0-65535", ErrBadAfter, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not an integer 0-65535", ErrBadAfter, s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not an integer 0-65535", ErrBadAfter, s)
	}
	return uint16(v), nil
}

// validKind reports whether k is a kind name: 1 to MaxKindLen of a-z 0-9 _.
func validKind(k string) bool {
	if len(k) == 0 || len(k) > MaxKindLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
