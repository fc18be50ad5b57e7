// Package defaults fills what a caller left unset in a component's
// options: the injected clock and logger (the real clock, a logger that
// discards), and the sizes, counts, rates and durations for which zero,
// or any value below it, means "the default".
//
// Every gateway component takes its clock and logger injected (tests run
// on a fake clock and a captured log); a component made without them runs
// on real time and logs nothing. The helpers keep that rule, and the rule
// of numeric options, in one place:
//
//	o.Clock = defaults.Clock(o.Clock)
//	o.Log = defaults.Log(o.Log)
//	o.Queue = defaults.Positive(o.Queue, DefaultQueue)
//	o.Retries = defaults.Limit(o.Retries, DefaultRetries) // -1: none
package defaults

import (
	"log/slog"

	"github.com/holofleet/holofleet/bus/clock"
)

// Number is what a numeric option can be: an integer, a float or a
// time.Duration.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64
}

// Clock is c, or clock.Real when c is nil.
func Clock(c clock.Clock) clock.Clock {
	if c == nil {
		return clock.Real
	}
	return c
}

// Log is l, or a logger that discards every record when l is nil.
func Log(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Positive is v when it is above zero, else def: an option for which
// zero and negative values both mean "the default".
func Positive[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Positives is Positive for a table of options of one type: each key
// points at an option, and an option not above zero is set to its value.
func Positives[T Number](options map[*T]T) {
	for p, def := range options {
		*p = Positive(*p, def)
	}
}

// Limit is an option where zero means the default and a negative value
// means none: def when v is zero, 0 when v is negative, else v.
func Limit[T Number](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
