package boardapi

// TimeReply is the reply of GET /time, the board's half of a clock
// exchange in four timestamps (NTP's method). The board's clock is its
// monotonic clock: microseconds since the board started (it starts over
// at every restart; it never steps otherwise).
//
// A client stamps t1 on its own clock just before it sends the request and
// t4 just after the reply arrived; with the board's t2 and t3 the offset
// of the board's clock from the client's is ((t2-t1)+(t3-t4))/2, and the
// round trip less the board's time inside is (t4-t1)-(t3-t2).
type TimeReply struct {
	// T1 echoes the request's t1 query parameter (null when absent), so a
	// client can match a reply to its request without keeping state.
	T1 *int64 `json:"t1" doc:"the t1 query parameter as sent, null when absent"`
	// T2 is when the board took the request, µs since it started.
	T2 int64 `json:"t2" doc:"when the board took the request, microseconds on its monotonic clock (since it started)"`
	// T3 is when the board sent the reply, µs since it started.
	T3 int64 `json:"t3" doc:"when the board sent the reply, microseconds on its monotonic clock"`
}

// Bounds of TimeAlign (extension clip-sync).
const (
	// MinAlignEpochUS and MaxAlignEpochUS bound TimeAlign.EpochUS: a Unix
	// time in µs from 2000-01-01 to 2200-01-01. Anything else is not a
	// gateway's clock but a mistake (seconds or ms sent as µs, a board
	// clock sent back).
	MinAlignEpochUS = 946_684_800_000_000
	MaxAlignEpochUS = 7_258_118_400_000_000
	// MaxAlignUncertaintyUS bounds TimeAlign.UncertaintyUS: one minute.
	MaxAlignUncertaintyUS = 60_000_000
)

// TimeAlign is the body of PUT /time (extension clip-sync): the gateway
// tells a board how its clock lines up with the gateway's, as the gateway
// measured it with GET /time. The board's aligned time (the gateway's
// clock as the board sees it) is then EpochUS plus its own clock, in
// Unix microseconds. A clip the board plays while aligned follows that
// time, so boards told by the same gateway stay on the same frame.
type TimeAlign struct {
	// EpochUS is the gateway's time, Unix µs, at which the board's clock
	// (GET /time's t2, t3) read 0: the gateway's moment of the board's
	// boot. Required; MinAlignEpochUS-MaxAlignEpochUS.
	EpochUS *int64 `json:"epoch_us" doc:"the gateway's time (Unix microseconds) at which the board's clock read 0; required"`
	// UncertaintyUS is how far EpochUS may be off, µs (0-60 s); reported
	// back, for people.
	UncertaintyUS int64 `json:"uncertainty_us,omitempty" doc:"how far epoch_us may be off, microseconds (0-60000000)"`
}

// Check validates the body's values: 400 bad_request when epoch_us is
// missing or out of range or uncertainty_us out of range.
func (a TimeAlign) Check() error {
	switch {
	case a.EpochUS == nil:
		return Errorf(ErrBadRequest, "epoch_us is required")
	case *a.EpochUS < MinAlignEpochUS || *a.EpochUS > MaxAlignEpochUS:
		return Errorf(ErrBadRequest, "epoch_us must be a Unix time in microseconds between 2000 and 2200, not %d", *a.EpochUS)
	case a.UncertaintyUS < 0 || a.UncertaintyUS > MaxAlignUncertaintyUS:
		return Errorf(ErrBadRequest, "uncertainty_us must be 0-%d, not %d", MaxAlignUncertaintyUS, a.UncertaintyUS)
	}
	return nil
}

// TimeAligned is the reply of PUT /time: the alignment the board holds
// now, and its clock and aligned time when it answered.
type TimeAligned struct {
	EpochUS       int64 `json:"epoch_us" doc:"the gateway's time (Unix µs) at which the board's clock read 0"`
	UncertaintyUS int64 `json:"uncertainty_us" doc:"as the gateway gave it"`
	// SetUS is the board's clock when the alignment was taken.
	SetUS int64 `json:"set_us" doc:"the board's clock (µs since it started) when it took this alignment"`
	// NowUS is the board's clock when it answered; AlignedUS the same
	// moment on the aligned clock (EpochUS + NowUS).
	NowUS     int64 `json:"now_us" doc:"the board's clock when it answered"`
	AlignedUS int64 `json:"aligned_us" doc:"the same moment on the aligned clock, Unix µs"`
}

// QueryClipStart is POST /screen/show's query parameter of extension
// clip-sync: clip_start=N names the clip's start on the board's aligned
// clock (the gateway's time, Unix µs), so that boards taking one group
// frame at slightly different moments still start their timelines on the
// same one. A board that is not aligned ignores it; an aligned board
// refuses (400 bad_request) a value more than MaxFireLead ahead of its
// aligned clock or more than MaxFireLate behind it.
const QueryClipStart = "clip_start"
