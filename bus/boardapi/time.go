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
