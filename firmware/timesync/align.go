package timesync

import (
	"net/http"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

// Aligner holds the gateway's alignment of the board's clock (extension
// clip-sync): the gateway's time, Unix µs, at which the board's clock read
// 0. The gateway measures it with GET /time and tells it with PUT /time;
// the latest one told wins. The aligned clock is that epoch plus the
// board's clock: the gateway's time as the board sees it. A boot starts
// unaligned (its clock starts over, so an earlier epoch means nothing).
//
// Between two alignments the aligned clock drifts from the gateway's at
// the rate the board's crystal is off (up to 50 ppm: 1.5 ms in the 30 s
// between a line's measures); each new alignment takes the drift out.
type Aligner struct {
	clk Clock

	mu  sync.Mutex
	a   boardapi.TimeAligned
	set bool
}

// NewAligner returns an unaligned Aligner over the boot's clock.
func NewAligner(clk Clock) *Aligner { return &Aligner{clk: clk} }

// Epoch returns the gateway's time (Unix µs) at which the board's clock
// read 0, and whether the board has been aligned in this boot.
func (a *Aligner) Epoch() (epochUS int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.a.EpochUS, a.set
}

// Set takes an alignment (checked by the caller) and returns what the
// board holds now.
func (a *Aligner) Set(epochUS, uncertaintyUS int64) boardapi.TimeAligned {
	now := a.clk.Micros()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.a = boardapi.TimeAligned{EpochUS: epochUS, UncertaintyUS: uncertaintyUS, SetUS: now}
	a.set = true
	out := a.a
	out.NowUS = now
	out.AlignedUS = epochUS + now
	return out
}

// Route returns PUT /time: a JSON boardapi.TimeAlign, strictly decoded
// and checked (400 bad_request, 400 bad_json); the reply is 200
// boardapi.TimeAligned. Served over the host link too. Like every changing
// request it needs the board's password once one is set.
func (a *Aligner) Route() api.Route {
	return api.Route{
		Method: http.MethodPut, Path: "/time", Link: true,
		Summary:  "Take the gateway's alignment of the board's clock (extension clip-sync): clips play on the aligned clock",
		Request:  boardapi.TimeAlign{},
		Response: boardapi.TimeAligned{},
		Errors:   []*api.Error{api.ErrBadRequest},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req boardapi.TimeAlign
			if err := api.Decode(r, &req, false); err != nil {
				api.WriteError(w, err)
				return
			}
			if err := req.Check(); err != nil {
				api.WriteError(w, err)
				return
			}
			api.WriteJSON(w, http.StatusOK, a.Set(*req.EpochUS, req.UncertaintyUS))
		}),
	}
}

// AlignedAt returns the moment t (on the board's underlying clock) on the
// aligned clock, Unix µs, and whether the board is aligned.
func (a *Aligner) AlignedAt(t time.Time) (us int64, ok bool) {
	e, ok := a.Epoch()
	if !ok {
		return 0, false
	}
	return e + a.clk.MicrosAt(t), true
}
