// Package timesync is the board's half of clock alignment: GET /time
// answers the moments the board took a request and sent its reply on its
// monotonic clock, so a client (the gateway) can work out the offset of the
// board's clock from its own by NTP's four-timestamp method.
//
// The board's clock is the time since the current boot started, in
// microseconds, read from the board's injected clock. It starts over at a
// restart (as esp_timer does on a real board) and never steps otherwise,
// which is what an offset estimate needs: a wall clock set by SNTP could
// jump between two samples.
//
// The route is served over HTTP and over the host link alike; over the
// link t2 is stamped once the whole request line has arrived and t3 just
// before the reply is written, so the line's wire time falls in the round
// trip, not in the board's share of it.
package timesync

import (
	"net/http"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

// Clock reads a board's monotonic clock: microseconds since origin.
type Clock struct {
	clk    clock.Clock
	origin time.Time
}

// New returns the monotonic clock of a boot that started at origin on clk.
func New(clk clock.Clock, origin time.Time) Clock { return Clock{clk: clk, origin: origin} }

// Micros is the time since origin in microseconds.
func (c Clock) Micros() int64 { return c.clk.Since(c.origin).Microseconds() }

// Time is the moment on the underlying clock that reads us on this one.
func (c Clock) Time(us int64) time.Time { return c.origin.Add(time.Duration(us) * time.Microsecond) }

// Route returns GET /time. The optional t1 query parameter (an integer,
// any clock of the client's) is echoed back; anything else there is a
// 400 bad_request.
func (c Clock) Route() api.Route {
	return api.Route{
		Method: http.MethodGet, Path: "/time", Link: true,
		Summary:  "The board's clock for alignment: when it took this request and sent the reply (µs since start)",
		Response: boardapi.TimeReply{},
		Query: []api.Param{{Name: "t1", Type: "integer",
			Description: "the client's send time, echoed back as t1"}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t2 := c.Micros()
			rep := boardapi.TimeReply{T2: t2}
			if s := r.URL.Query().Get("t1"); s != "" || r.URL.Query().Has("t1") {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					api.WriteError(w, api.Errorf(api.ErrBadRequest, "t1 must be an integer, not %q", s))
					return
				}
				rep.T1 = &v
			}
			rep.T3 = c.Micros()
			api.WriteJSON(w, http.StatusOK, rep)
		}),
	}
}

// MicrosAt is the moment t of the underlying clock in µs since origin.
func (c Clock) MicrosAt(t time.Time) int64 { return t.Sub(c.origin).Microseconds() }
