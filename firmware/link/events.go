package link

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
)

// Happening kinds a host may ask for (the native EVENTS_SET bits). Over
// JSON lines a host may also name state kinds (leds, screen, ...): those
// are pushed on UART and never kept.
var happeningKinds = []string{events.KindClipEnded, events.KindSceneEnded, events.KindTouch, events.KindClipStarted, events.KindSceneStarted}

func isHappening(kind string) bool { return slices.Contains(happeningKinds, kind) }

var stateKinds = []string{events.KindScreen, events.KindLEDs, events.KindHolo, events.KindScene, events.KindScenes,
	events.KindSettings, events.KindNetwork, events.KindOTA, events.KindSystem}

func validKinds(kinds []string) error {
	seen := map[string]bool{}
	for _, k := range kinds {
		if !isHappening(k) && !slices.Contains(stateKinds, k) {
			return api.Errorf(api.ErrBadRequest, "unknown event kind %q", k)
		}
		if seen[k] {
			return api.Errorf(api.ErrBadRequest, "event kind %q listed twice", k)
		}
		seen[k] = true
	}
	return nil
}

// MaxKept is how many happenings the link keeps for its host, as the
// board keeps 32.
const MaxKept = events.DefaultKeep

// hostEvents tracks what the host asked for and what it has not been given.
type hostEvents struct {
	hub *events.Hub

	mu     sync.Mutex
	kinds  []string
	push   bool
	native bool // push as native 0x70 frames rather than "! " lines
	queue  []events.Happening
	lost   int // happenings dropped from the queue since the host last fetched
	sub    *events.Subscription
	notify func() // called when pending changes (ATTN, I2C)
	// changed is signalled when the subscription is replaced.
	changed chan struct{}
}

// EventsState is the reply of PATCH /link/events.
type EventsState struct {
	Kinds   []string `json:"kinds"`
	Push    bool     `json:"push"`
	Seq     uint16   `json:"seq"`
	Pending int      `json:"pending"`
}

// EventsPatch is the body of PATCH /link/events.
type EventsPatch struct {
	Kinds *[]string `json:"kinds,omitempty"`
	Push  *bool     `json:"push,omitempty"`
}

// EventsReply is the reply of GET /link/events.
type EventsReply struct {
	Seq     uint16            `json:"seq"`
	Lost    int               `json:"lost"`
	Pending int               `json:"pending"`
	Events  []json.RawMessage `json:"events"`
}

// set replaces the host's kinds and push flag; happenings already queued
// that no longer match are dropped. It returns the subscription filter to
// use for live events.
func (h *hostEvents) set(kinds []string, push, native bool) {
	h.mu.Lock()
	h.kinds = append([]string{}, kinds...)
	h.push, h.native = push, native
	kept := h.queue[:0]
	for _, hp := range h.queue {
		if slices.Contains(h.kinds, hp.Kind) {
			kept = append(kept, hp)
		}
	}
	h.queue = kept
	old := h.sub
	h.sub = nil
	if len(h.kinds) > 0 {
		h.sub = h.hub.Subscribe(events.FilterOf(h.kinds...), nil)
	}
	notify := h.notify
	h.mu.Unlock()
	if old != nil {
		old.Close()
	}
	select {
	case h.changed <- struct{}{}:
	default:
	}
	if notify != nil {
		notify()
	}
}

func (h *hostEvents) subscription() *events.Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sub
}

func (h *hostEvents) state() EventsState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return EventsState{Kinds: append([]string{}, h.kinds...), Push: h.push, Seq: h.hub.Latest(), Pending: len(h.queue)}
}

func (h *hostEvents) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queue)
}

func (h *hostEvents) pushing() (push, native bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.push, h.native
}

// keep queues a happening the host has not been given.
func (h *hostEvents) keep(hp events.Happening) {
	h.mu.Lock()
	if !slices.Contains(h.kinds, hp.Kind) {
		h.mu.Unlock()
		return
	}
	h.queue = append(h.queue, hp)
	if len(h.queue) > MaxKept {
		h.queue = h.queue[1:]
		h.lost++
	}
	notify := h.notify
	h.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// take returns up to max happenings for the host. With after 0 they are
// the ones not yet given; otherwise every kept one of the host's kinds
// after seq after. When give is true they count as given.
func (h *hostEvents) take(after uint16, max int, give bool) (seq uint16, lost int, out []events.Happening) {
	h.mu.Lock()
	if after == 0 {
		n := min(max, len(h.queue))
		out = append(out, h.queue[:n]...)
		lost = h.lost
		if give {
			h.queue = h.queue[n:]
			h.lost = 0
		}
		h.mu.Unlock()
	} else {
		filter := events.FilterOf(h.kinds...)
		kinds := len(h.kinds)
		h.mu.Unlock()
		if kinds == 0 {
			return h.hub.Latest(), 0, nil
		}
		var all []events.Happening
		seq, lost, all = h.hub.Since(after, filter)
		out = all[:min(max, len(all))]
		if give {
			h.given(out)
		}
		return seq, lost, out
	}
	if give && len(out) > 0 && h.notify != nil {
		h.notify()
	}
	return h.hub.Latest(), lost, out
}

// given removes happenings from the queue (they were handed over).
func (h *hostEvents) given(hs []events.Happening) {
	if len(hs) == 0 {
		return
	}
	h.mu.Lock()
	kept := h.queue[:0]
	for _, q := range h.queue {
		if !slices.ContainsFunc(hs, func(x events.Happening) bool { return x.Seq == q.Seq && x.Kind == q.Kind }) {
			kept = append(kept, q)
		}
	}
	h.queue = kept
	notify := h.notify
	h.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// popOldest gives the oldest pending happening (the I2C EVENT register).
func (h *hostEvents) popOldest() (events.Happening, bool) {
	h.mu.Lock()
	if len(h.queue) == 0 {
		h.mu.Unlock()
		return events.Happening{}, false
	}
	hp := h.queue[0]
	h.queue = h.queue[1:]
	notify := h.notify
	h.mu.Unlock()
	if notify != nil {
		notify()
	}
	return hp, true
}

func (h *hostEvents) close() {
	h.mu.Lock()
	sub := h.sub
	h.sub = nil
	h.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}

func (srv *Server) eventRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/link/events", Link: true,
			Summary:  "Happenings not yet given to the host (over the link they count as given; over HTTP nothing is given away)",
			Response: EventsReply{}, Query: []api.Param{{Name: "after", Type: "integer", Description: "every kept happening of the host's kinds after this seq"}},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var after uint16
				if v := r.URL.Query().Get("after"); v != "" {
					n, err := strconv.ParseUint(v, 10, 16)
					if err != nil {
						api.WriteError(w, api.Errorf(api.ErrBadRequest, "after must be a seq 0-65535"))
						return
					}
					after = uint16(n)
				}
				seq, lost, hs := srv.events.take(after, MaxKept, api.ViaLink(r))
				rep := EventsReply{Seq: seq, Lost: lost, Pending: srv.events.pending(), Events: []json.RawMessage{}}
				for _, hp := range hs {
					rep.Events = append(rep.Events, hp.Data)
				}
				api.WriteJSON(w, http.StatusOK, rep)
			})},
		{Method: http.MethodPatch, Path: "/link/events", Link: true,
			Summary: "Choose the happenings the host gets and whether they are pushed (until restart)",
			Request: EventsPatch{}, Response: EventsState{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var p EventsPatch
				if err := api.Decode(r, &p, false); err != nil {
					api.WriteError(w, err)
					return
				}
				st := srv.events.state()
				kinds, push := st.Kinds, st.Push
				if p.Kinds != nil {
					kinds = *p.Kinds
					if kinds == nil {
						kinds = []string{}
					}
				}
				if p.Push != nil {
					push = *p.Push
				}
				if err := validKinds(kinds); err != nil {
					api.WriteError(w, err)
					return
				}
				srv.setEvents(kinds, push, nativeRequest(r))
				api.WriteJSON(w, http.StatusOK, srv.events.state())
			})},
	}
}

// recordOf turns a happening into a native event record.
func recordOf(hp events.Happening) (frame.Record, bool) {
	var f struct {
		Finished      bool    `json:"finished"`
		Slot          int     `json:"slot"`
		Then          string  `json:"then"`
		By            string  `json:"by"`
		UntilClipEnds bool    `json:"until_clip_ends"`
		DurationS     float64 `json:"duration_s"`
		Action        string  `json:"action"`
		X             int     `json:"x"`
		Y             int     `json:"y"`
		Loop          bool    `json:"loop"`
		Plays         int     `json:"plays"`
		Frames        int     `json:"frames"`
		FPS           float64 `json:"fps"`
	}
	if err := json.Unmarshal(hp.Data, &f); err != nil {
		return frame.Record{}, false
	}
	kind, err := frame.ParseKind(hp.Kind)
	if err != nil {
		return frame.Record{}, false
	}
	r := frame.Record{Kind: kind, Seq: hp.Seq}
	then, _ := frame.ParseThen(f.Then)
	switch hp.Kind {
	case events.KindClipEnded:
		r.Finished = f.Finished
	case events.KindSceneEnded:
		by, _ := frame.ParseEndedBy(f.By)
		r.Slot, r.Then, r.By = clampU8(f.Slot), then, by
	case events.KindTouch:
		a, _ := frame.ParseTouchAction(f.Action)
		r.Action, r.X, r.Y = a, clampU8(f.X), clampU8(f.Y)
	case events.KindClipStarted:
		r.Loop, r.Plays, r.FPS = f.Loop, clampU8(f.Plays), clampU8(int(f.FPS+0.5))
		r.Frames = uint16(min(max(f.Frames, 0), 65535))
	case events.KindSceneStarted:
		r.Slot, r.Then, r.UntilClipEnds = clampU8(f.Slot), then, f.UntilClipEnds
		d := f.DurationS
		if d > 0 {
			whole := int(d)
			if float64(whole) < d {
				whole++
			}
			r.DurationS = uint16(min(whole, 65535))
		}
	default:
		return frame.Record{}, false
	}
	return r, true
}

func clampU8(n int) uint8 { return uint8(min(max(n, 0), 255)) }
