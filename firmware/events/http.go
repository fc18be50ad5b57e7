package events

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
)

// Reply is the JSON form of GET /events: the newest seq (0 before the
// first), how many happenings after the asked seq are no longer kept, and
// the kept ones after it as their data objects, oldest first. Without an
// after value every kept happening is returned and lost is 0.
type Reply struct {
	Seq    uint16            `json:"seq"`
	Lost   int               `json:"lost"`
	Events []json.RawMessage `json:"events"`
}

// maxBatch is about how many bytes of events one stream write carries.
const maxBatch = 16 << 10

// Route returns GET /events for the API server; the host link serves it
// too, always in its JSON form.
func (h *Hub) Route() api.Route {
	return api.Route{
		Method:   http.MethodGet,
		Path:     "/events",
		Handler:  h,
		Link:     true,
		Summary:  "Follow state changes and happenings (SSE), or read kept happenings (JSON)",
		Response: Reply{},
		Query: []api.Param{
			{Name: "kinds", Type: "string", Description: "comma list of event kinds; all when absent"},
			{Name: "after", Type: "integer", Description: "replay happenings after this seq"},
		},
		Errors: []*api.Error{api.ErrStreamsBusy},
	}
}

// ServeHTTP serves GET /events: a Server-Sent Events stream when the
// request accepts text/event-stream (not over the host link), otherwise the
// JSON Reply. Query: kinds (comma list), after (seq); for a stream the
// Last-Event-ID header, when present, wins over after.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	filter, after, err := parseQuery(r)
	if err != nil {
		api.WriteError(w, api.Errorf(api.ErrBadRequest, "%v", err))
		return
	}
	if !api.ViaLink(r) && acceptsStream(r.Header.Values("Accept")) {
		h.serveStream(w, r, filter, after)
		return
	}
	h.mu.Lock()
	var from uint64
	if after != nil {
		from = h.resolve(*after)
	} else {
		from = h.oldestKept() - 1
	}
	lost, list := h.keptAfter(from, filter)
	rep := Reply{Seq: seqOf(h.count), Lost: lost, Events: make([]json.RawMessage, len(list))}
	h.mu.Unlock()
	for i, hp := range list {
		rep.Events[i] = hp.Data
	}
	api.WriteJSON(w, http.StatusOK, rep)
}

// parseQuery reads kinds (every kinds value, joined) and after: the
// Last-Event-ID header when not empty, else the after query value.
func parseQuery(r *http.Request) (Filter, *uint16, error) {
	q := r.URL.Query()
	var lists []string
	for _, v := range q["kinds"] {
		if strings.TrimSpace(v) != "" {
			lists = append(lists, v)
		}
	}
	filter, err := ParseFilter(strings.Join(lists, ","))
	if err != nil {
		return Filter{}, nil, err
	}
	var raw string
	var has bool
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		raw, has = id, true
	} else if q.Has("after") {
		raw, has = q.Get("after"), true
	}
	if !has {
		return filter, nil, nil
	}
	after, err := ParseAfter(raw)
	if err != nil {
		return Filter{}, nil, err
	}
	return filter, &after, nil
}

// acceptsStream reports whether an Accept header names text/event-stream
// (a wildcard does not count: the JSON form is the default).
func acceptsStream(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

func (h *Hub) serveStream(w http.ResponseWriter, r *http.Request, filter Filter, after *uint16) {
	trusted := h.opts.Trusted == nil || h.opts.Trusted(r)
	release, err := h.acquireStream(trusted)
	if err != nil {
		api.WriteError(w, api.Errorf(api.ErrStreamsBusy, "%v", err))
		return
	}
	defer release()
	sub := h.Subscribe(filter, after)
	defer sub.Close()

	rc := http.NewResponseController(w)
	send := func(b []byte) error {
		// A deadline is real time: it bounds how long a client that stopped
		// reading may hold its slot. Writers without deadlines (recorders)
		// report ErrNotSupported, which is fine.
		if err := rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 1024)
	buf = append(buf, "retry: "...)
	buf = strconv.AppendInt(buf, RetryMillis, 10)
	buf = append(buf, "\n\n"...)
	if send(buf) != nil {
		return
	}

	beat := h.clk.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	ctx := r.Context()
	for {
		buf = buf[:0]
		var end error
		for len(buf) < maxBatch {
			m, ok, err := sub.TryNext()
			if err != nil {
				end = err
				break
			}
			if !ok {
				break
			}
			buf = AppendFrame(buf, m)
		}
		if len(buf) > 0 && send(buf) != nil {
			return
		}
		if end != nil {
			if errors.Is(end, ErrOverflow) {
				h.log.Warn("events: stream fell behind; ended so the client reconnects", "remote", r.RemoteAddr)
			}
			return
		}
		if len(buf) >= maxBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-sub.Ready():
		case <-beat.C():
			if send([]byte(": keep-alive\n\n")) != nil {
				return
			}
		}
	}
}

// AppendFrame appends m as one Server-Sent Events message: event, data and,
// for a happening, id lines, then a blank line.
func AppendFrame(b []byte, m Message) []byte {
	b = append(b, "event: "...)
	b = append(b, m.Kind...)
	b = append(b, "\ndata: "...)
	b = append(b, m.Data...)
	b = append(b, '\n')
	if m.Happening {
		b = append(b, "id: "...)
		b = strconv.AppendUint(b, uint64(m.ID), 10)
		b = append(b, '\n')
	}
	return append(b, '\n')
}
