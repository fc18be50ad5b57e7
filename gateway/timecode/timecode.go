// Package timecode is SMPTE-style show timecode as the gateway reads it:
// a position (hours, minutes, seconds, frames) at a rate, its text form,
// and the Art-Net ArtTimeCode packet that carries it on a lighting
// network.
//
// A position is ordered by its frame count at its rate (Frames). Drop
// frame (29.97df) labels skip frame numbers 0 and 1 at the start of every
// minute except every tenth, so that the label keeps up with the wall
// clock; Frames counts the frames actually sent, and Duration turns a
// frame count into real time at the rate (1001/30000 s a frame at
// 29.97).
//
// Text form: "HH:MM:SS:FF" (non-drop), "HH:MM:SS;FF" or "HH:MM:SS.FF"
// (drop frame, the convention of editing software). Parse refuses
// anything out of range for the rate.
package timecode

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors.
var (
	// ErrBadTimecode: text or fields that are no timecode at the rate
	// (a field out of range, a dropped frame label, a bad separator).
	ErrBadTimecode = errors.New("timecode: bad timecode")
	// ErrBadRate: a rate that is not 24, 25, 29.97df or 30.
	ErrBadRate = errors.New("timecode: bad rate")
)

// Rate is a timecode source's frame rate. Its values are ArtTimeCode's
// Type field.
type Rate uint8

// Rates.
const (
	Film  Rate = 0 // 24 fps
	EBU   Rate = 1 // 25 fps
	DF    Rate = 2 // 29.97 fps drop frame
	SMPTE Rate = 3 // 30 fps
)

// Rates lists every rate.
var Rates = []Rate{Film, EBU, DF, SMPTE}

// Valid reports whether r is one of the four rates.
func (r Rate) Valid() bool { return r <= SMPTE }

// FPS is the nominal frames a second of the label: 24, 25, 30 (30 for
// drop frame too: its labels count 30 a second).
func (r Rate) FPS() int {
	switch r {
	case Film:
		return 24
	case EBU:
		return 25
	}
	return 30
}

// FrameDuration is one frame's real time.
func (r Rate) FrameDuration() time.Duration {
	if r == DF {
		return time.Duration(int64(time.Second) * 1001 / 30000)
	}
	return time.Second / time.Duration(r.FPS())
}

// String is the rate as the docs and the API name it: "24", "25",
// "29.97df", "30".
func (r Rate) String() string {
	switch r {
	case Film:
		return "24"
	case EBU:
		return "25"
	case DF:
		return "29.97df"
	case SMPTE:
		return "30"
	}
	return fmt.Sprintf("rate(%d)", uint8(r))
}

// ParseRate reads a rate as String writes it (also "29.97", "df",
// "30df", "23.976" is refused: ArtTimeCode has no such rate).
func ParseRate(s string) (Rate, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "24":
		return Film, nil
	case "25":
		return EBU, nil
	case "29.97df", "29.97", "df", "30df", "2997":
		return DF, nil
	case "30":
		return SMPTE, nil
	}
	return 0, fmt.Errorf("%w: %q (24, 25, 29.97df or 30)", ErrBadRate, s)
}

// MarshalText writes String.
func (r Rate) MarshalText() ([]byte, error) {
	if !r.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrBadRate, r)
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads ParseRate's forms.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Timecode is a position at a rate.
type Timecode struct {
	Hours, Minutes, Seconds, Frames uint8
	Rate                            Rate
}

// Check reports a field out of range for the rate, or a label drop frame
// skips (frames 0 and 1 of a minute not divisible by ten).
func (t Timecode) Check() error {
	switch {
	case !t.Rate.Valid():
		return fmt.Errorf("%w: rate %d", ErrBadRate, t.Rate)
	case t.Hours > 23 || t.Minutes > 59 || t.Seconds > 59:
		return fmt.Errorf("%w: %02d:%02d:%02d (hours 0-23, minutes and seconds 0-59)", ErrBadTimecode, t.Hours, t.Minutes, t.Seconds)
	case int(t.Frames) >= t.Rate.FPS():
		return fmt.Errorf("%w: frame %d at %s fps (0-%d)", ErrBadTimecode, t.Frames, t.Rate, t.Rate.FPS()-1)
	case t.Rate == DF && t.Seconds == 0 && t.Frames < 2 && t.Minutes%10 != 0:
		return fmt.Errorf("%w: %s does not exist in drop frame (frames 0 and 1 are skipped at minute %d)", ErrBadTimecode, t, t.Minutes)
	}
	return nil
}

// Count is the position as frames from 00:00:00:00 at its rate (drop
// frame: the frames actually sent, so labels skipped count nothing). The
// order of Count is the order of the labels.
func (t Timecode) Count() int64 {
	fps := int64(t.Rate.FPS())
	n := ((int64(t.Hours)*60+int64(t.Minutes))*60+int64(t.Seconds))*fps + int64(t.Frames)
	if t.Rate == DF {
		mins := int64(t.Hours)*60 + int64(t.Minutes)
		n -= 2 * (mins - mins/10)
	}
	return n
}

// Duration is the real time from 00:00:00:00 to t.
func (t Timecode) Duration() time.Duration { return FramesDuration(t.Count(), t.Rate) }

// FramesDuration is n frames' real time at r.
func FramesDuration(n int64, r Rate) time.Duration {
	if r == DF {
		return time.Duration(n * int64(time.Second) * 1001 / 30000)
	}
	return time.Duration(n * int64(time.Second) / int64(r.FPS()))
}

// perDay is the frames of 24 hours at r (the count wraps there).
func perDay(r Rate) int64 {
	return Timecode{Hours: 23, Minutes: 59, Seconds: 59, Frames: uint8(r.FPS() - 1), Rate: r}.Count() + 1
}

// FromCount is the timecode n frames from 00:00:00:00 at r (wrapping at
// 24 hours; a negative n counts back from 24:00:00:00).
func FromCount(n int64, r Rate) Timecode {
	day := perDay(r)
	n %= day
	if n < 0 {
		n += day
	}
	fps := int64(r.FPS())
	if r == DF {
		// Put the skipped labels back: 17982 frames every ten minutes,
		// 1798 in each minute after the first of ten.
		tens, rem := n/17982, n%17982
		n += 18 * tens
		if rem > 1 {
			n += 2 * ((rem - 2) / 1798)
		}
	}
	return Timecode{Hours: uint8(n / (fps * 3600)), Minutes: uint8(n / (fps * 60) % 60),
		Seconds: uint8(n / fps % 60), Frames: uint8(n % fps), Rate: r}
}

// String is "HH:MM:SS:FF", with ';' before the frames in drop frame.
func (t Timecode) String() string {
	sep := ':'
	if t.Rate == DF {
		sep = ';'
	}
	return fmt.Sprintf("%02d:%02d:%02d%c%02d", t.Hours, t.Minutes, t.Seconds, sep, t.Frames)
}

// Parse reads "HH:MM:SS:FF" at rate r; a ';' or '.' before the frames
// means drop frame whatever r says (then r must be DF or SMPTE, which
// it makes DF). Each field is one or two digits.
func Parse(s string, r Rate) (Timecode, error) {
	if !r.Valid() {
		return Timecode{}, fmt.Errorf("%w: %d", ErrBadRate, r)
	}
	if len(s) < 7 || len(s) > 11 {
		return Timecode{}, fmt.Errorf("%w: %q (HH:MM:SS:FF)", ErrBadTimecode, s)
	}
	last := strings.LastIndexAny(s, ":;.")
	if last < 0 {
		return Timecode{}, fmt.Errorf("%w: %q (HH:MM:SS:FF)", ErrBadTimecode, s)
	}
	if s[last] != ':' {
		if r != DF && r != SMPTE {
			return Timecode{}, fmt.Errorf("%w: %q is drop frame, the rate %s", ErrBadTimecode, s, r)
		}
		r = DF
	}
	parts := strings.Split(s[:last], ":")
	parts = append(parts, s[last+1:])
	if len(parts) != 4 {
		return Timecode{}, fmt.Errorf("%w: %q (HH:MM:SS:FF)", ErrBadTimecode, s)
	}
	var v [4]uint8
	for i, p := range parts {
		if len(p) < 1 || len(p) > 2 || p[0] < '0' || p[0] > '9' || p[len(p)-1] < '0' || p[len(p)-1] > '9' {
			return Timecode{}, fmt.Errorf("%w: %q (HH:MM:SS:FF, digits)", ErrBadTimecode, s)
		}
		n, _ := strconv.Atoi(p)
		v[i] = uint8(n)
	}
	t := Timecode{Hours: v[0], Minutes: v[1], Seconds: v[2], Frames: v[3], Rate: r}
	return t, t.Check()
}
