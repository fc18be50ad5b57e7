package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/firmware/leds"
)

// Transports a Result names in Via.
const (
	ViaRS485 = "rs485"
	ViaLAN   = "lan"
	ViaGroup = "group"
)

// route is one way to reach a board.
type route struct {
	d    Driver
	addr string
	via  string
}

// routesLocked lists the ways to run method on path on board b, best
// first: the line for paths the link serves, else the LAN (and the line
// after the LAN when both serve it). Only places that reach the board now
// are listed.
func (f *Fleet) routesLocked(b *boardState, method, path string) ([]route, error) {
	served := jsonline.Served(method, path)
	var lineRoutes, lanRoutes []route
	onLineOnly := false
	refs := slices.Collect(maps.Keys(b.refs))
	slices.SortFunc(refs, func(a, b Ref) int { return cmp.Compare(a.String(), b.String()) })
	for _, ref := range refs {
		st := b.refs[ref]
		if !st.online {
			continue
		}
		d, ok := f.drivers[ref.Driver]
		if !ok {
			continue
		}
		if _, isLine := f.lines[ref.Driver]; isLine {
			onLineOnly = true
			if served {
				lineRoutes = append(lineRoutes, route{d, ref.Addr, ViaRS485})
			}
			continue
		}
		lanRoutes = append(lanRoutes, route{d, ref.Addr, ViaLAN})
	}
	if len(lanRoutes) > 0 {
		onLineOnly = false
	}
	if served {
		return append(lineRoutes, lanRoutes...), nil
	}
	if onLineOnly {
		return nil, fmt.Errorf("%w: %s %s: board %s is reachable only over RS485", ErrNotOverLink, method, path, b.rec.ID)
	}
	return lanRoutes, nil
}

// apiPath drops the API prefix: drivers take paths as the spec's endpoint
// table writes them ("/leds?x=1").
func apiPath(path string) string {
	if rest, ok := strings.CutPrefix(path, jsonline.APIPrefix); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
		return rest
	}
	return path
}

// Call implements Service: it runs one API request on the board by the
// transport that fits and returns the board's reply as it came. A board
// error (status 400 or more) is a Reply, not an error; errors are
// ErrUnknownBoard, ErrUnreachable, ErrNotOverLink and the driver's
// (ErrNoReply, ErrBadReply, ErrTooLarge, ...). A GET that fails on one
// transport is tried on the next, and so is any request too large for
// one (ErrTooLarge: nothing was sent).
func (f *Fleet) Call(ctx context.Context, id, method, path string, body []byte) (Reply, error) {
	start := f.clk.Now()
	rep, via, err := f.call(ctx, id, method, path, body)
	f.observe(via, callKind(method, path), start, err)
	return rep, err
}

func (f *Fleet) call(ctx context.Context, id, method, path string, body []byte) (Reply, string, error) {
	path = apiPath(path)
	f.mu.Lock()
	b, ok := f.boards[id]
	if !ok {
		f.mu.Unlock()
		return Reply{}, "", fmt.Errorf("%w: %q", ErrUnknownBoard, id)
	}
	routes, err := f.routesLocked(b, method, path)
	reason := b.reason
	f.mu.Unlock()
	if err != nil {
		return Reply{}, "", err
	}
	if len(routes) == 0 {
		return Reply{}, "", fmt.Errorf("%w: board %s: %s", ErrUnreachable, id, reason)
	}
	var errs []error
	for i, r := range routes {
		rep, err := r.d.Call(ctx, r.addr, method, path, body)
		if err == nil {
			return rep, r.via, nil
		}
		errs = append(errs, fmt.Errorf("%s %s: %w", r.d.Name(), r.addr, err))
		// A request too large for one transport was not sent: another
		// (the LAN after a line) may carry it, whatever the method.
		if method != http.MethodGet && !errors.Is(err, ErrTooLarge) || ctx.Err() != nil || i == len(routes)-1 {
			break
		}
	}
	return Reply{}, routes[0].via, fmt.Errorf("board %s: %w", id, errors.Join(errs...))
}

// actionRequests maps action kinds to the API request each stands for.
var actionRequests = map[string]struct{ method, path string }{
	ActionSceneApply: {http.MethodPost, "/scenes/apply"},
	ActionSceneEnd:   {http.MethodPost, "/scenes/end"},
	ActionLEDs:       {http.MethodPatch, "/leds"},
	ActionScreenShow: {http.MethodPost, "/screen/show"},
	ActionScreenOff:  {http.MethodDelete, "/screen"},
	ActionHolo:       {http.MethodPost, "/holo/motion"},
}

// groupSend is one group frame (or JSON line) on one line and the boards
// it reaches.
type groupSend struct {
	line    Line
	group   int // 0: every board on the line
	members []string
}

// Do implements Service. Boards named by id, and boards picked by labels,
// are called one by one (concurrently, at most Concurrency at a time).
// Group and All selectors go out as one frame per line and group (group
// 0, every board, for All) where the action has a native form, else as
// one JSON line to the group; members no line reaches now are called one
// by one over the LAN. Each board appears once in the results, ordered by
// id; boards reached by a group frame report Via "group" and no reply.
func (f *Fleet) Do(ctx context.Context, sel Selector, a Action) ([]Result, error) {
	req, ok := actionRequests[a.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %q", ErrBadAction, a.Kind)
	}
	body := []byte(a.Body)
	if len(body) > 0 && !json.Valid(body) {
		return nil, fmt.Errorf("%w: %s body is not JSON", ErrBadAction, a.Kind)
	}
	if len(sel.Boards) == 0 && len(sel.Groups) == 0 && len(sel.Labels) == 0 && !sel.All {
		return nil, fmt.Errorf("%w: no boards, groups, labels or all", ErrBadSelector)
	}
	for _, g := range sel.Groups {
		if g < 1 || g > frame.MaxGroup {
			return nil, fmt.Errorf("%w: group %d (groups are 1-%d)", ErrBadSelector, g, frame.MaxGroup)
		}
	}
	sends, single, err := f.plan(sel)
	if err != nil {
		return nil, err
	}
	native, hasNative := nativeForm(a.Kind, body)

	results := map[string]Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Lines work in parallel; on one line the frames go one after the other.
	byLine := map[string][]groupSend{}
	for _, s := range sends {
		byLine[s.line.Name()] = append(byLine[s.line.Name()], s)
	}
	for _, ss := range byLine {
		wg.Go(func() {
			for _, s := range ss {
				var err error
				start := f.clk.Now()
				if hasNative {
					err = s.line.Group(ctx, s.group, native)
				} else {
					err = s.line.GroupCall(ctx, s.group, req.method, req.path, body)
				}
				f.observe(ViaGroup, a.Kind, start, err)
				mu.Lock()
				for _, id := range s.members {
					r := Result{Board: id, Via: ViaGroup}
					if err != nil {
						r.Error = err.Error()
					}
					results[id] = r
				}
				mu.Unlock()
			}
		})
	}
	sem := make(chan struct{}, f.o.Concurrency)
	for _, id := range single {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				results[id] = Result{Board: id, Error: ctx.Err().Error()}
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			start := f.clk.Now()
			rep, via, err := f.call(ctx, id, req.method, req.path, body)
			f.observe(via, a.Kind, start, err)
			r := Result{Board: id, Via: via, Reply: rep}
			if err != nil {
				r.Error = err.Error()
			} else if e := rep.Err(); e != nil {
				r.Error = e.Error()
			}
			mu.Lock()
			results[id] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	out := make([]Result, 0, len(results))
	for _, id := range sortedKeys(results) {
		out = append(out, results[id])
	}
	return out, nil
}

// plan resolves sel into group sends and boards to call one by one.
func (f *Fleet) plan(sel Selector) ([]groupSend, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	covered := map[string]bool{}
	var sends []groupSend
	// lineOf returns the line that reaches b now, if any.
	lineOf := func(b *boardState) (Line, bool) {
		for ref, st := range b.refs {
			if l, ok := f.lines[ref.Driver]; ok && st.online {
				return l, true
			}
		}
		return nil, false
	}
	add := func(group int, members []string) {
		perLine := map[string]*groupSend{}
		var order []string
		for _, id := range members {
			l, ok := lineOf(f.boards[id])
			if !ok {
				continue
			}
			s := perLine[l.Name()]
			if s == nil {
				s = &groupSend{line: l, group: group}
				perLine[l.Name()] = s
				order = append(order, l.Name())
			}
			s.members = append(s.members, id)
			covered[id] = true
		}
		for _, name := range order {
			sends = append(sends, *perLine[name])
		}
	}
	ids := sortedKeys(f.boards)
	var single []string
	if sel.All {
		add(0, ids)
		for _, id := range ids {
			if !covered[id] {
				single = append(single, id)
			}
		}
		return sends, single, nil
	}
	for _, g := range sel.Groups {
		var members []string
		for _, id := range ids {
			if slices.Contains(f.boards[id].rec.Groups, g) {
				members = append(members, id)
			}
		}
		if len(members) == 0 {
			return nil, nil, fmt.Errorf("%w: %d", ErrUnknownGroup, g)
		}
		add(g, members)
		for _, id := range members {
			if !covered[id] && !slices.Contains(single, id) {
				single = append(single, id)
			}
		}
	}
	for _, id := range sel.Boards {
		if _, ok := f.boards[id]; !ok {
			return nil, nil, fmt.Errorf("%w: %q", ErrUnknownBoard, id)
		}
		if !covered[id] && !slices.Contains(single, id) {
			single = append(single, id)
		}
	}
	if len(sel.Labels) > 0 {
		for _, id := range ids {
			if f.boards[id].matches(Filter{Labels: sel.Labels}) && !covered[id] && !slices.Contains(single, id) {
				single = append(single, id)
			}
		}
	}
	return sends, single, nil
}

// nativeForm returns the native request standing for an action, when its
// body can be said exactly in native bytes: a scene by slot, scene end,
// screen off, a screen colour, an LED change that sets loop (the native
// form always sets it) and a holo motion whose numbers fit the frame.
func nativeForm(kind string, body []byte) (frame.Request, bool) {
	if len(body) == 0 {
		body = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, false
	}
	only := func(keys ...string) bool {
		for k := range fields {
			if !slices.Contains(keys, k) {
				return false
			}
		}
		return true
	}
	num := func(k string) (float64, bool, bool) { // value, present, ok
		raw, ok := fields[k]
		if !ok {
			return 0, false, true
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return 0, true, false
		}
		return v, true, true
	}
	str := func(k string) (string, bool) {
		var s string
		err := json.Unmarshal(fields[k], &s)
		return s, err == nil
	}
	whole := func(v float64, lo, hi int) bool { return v == math.Trunc(v) && v >= float64(lo) && v <= float64(hi) }
	switch kind {
	case ActionSceneEnd:
		return frame.EndRequest{}, true
	case ActionScreenOff:
		return frame.ScreenOffRequest{}, true
	case ActionSceneApply:
		slot, present, ok := num("slot")
		if !only("slot") || !present || !ok || !whole(slot, 1, 255) {
			return nil, false
		}
		return frame.SceneRequest{Slot: uint8(slot)}, true
	case ActionScreenShow:
		if !only("colour") {
			return nil, false
		}
		s, ok := str("colour")
		if !ok {
			return nil, false
		}
		c, err := leds.ParseColour(s)
		if err != nil {
			return nil, false
		}
		return frame.ColourRequest{R: c.R, G: c.G, B: c.B}, true
	case ActionLEDs:
		if !only("mode", "colour", "loop", "brightness") {
			return nil, false
		}
		var loop bool
		if err := json.Unmarshal(fields["loop"], &loop); err != nil {
			return nil, false
		}
		r := frame.LEDsRequest{Mode: frame.LEDKeep}
		if loop {
			r.Flags |= frame.LEDLoop
		}
		if _, ok := fields["mode"]; ok {
			s, ok := str("mode")
			m, err := frame.ParseLEDMode(s)
			if !ok || err != nil {
				return nil, false
			}
			r.Mode = m
		}
		if _, ok := fields["colour"]; ok {
			s, ok := str("colour")
			c, err := leds.ParseColour(s)
			if !ok || err != nil {
				return nil, false
			}
			r.R, r.G, r.B = c.R, c.G, c.B
			r.Flags |= frame.LEDNewColour
		}
		if v, present, ok := num("brightness"); present {
			if !ok || !whole(v, 1, 100) {
				return nil, false
			}
			r.Brightness = uint8(v)
		}
		return r, true
	case ActionHolo:
		if !only("motion", "x", "y", "duration_ms", "range", "count") {
			return nil, false
		}
		s, ok := str("motion")
		m, err := frame.ParseMotion(s)
		if !ok || err != nil {
			return nil, false
		}
		r := frame.HoloRequest{Motion: m}
		x, hasX, okX := num("x")
		y, hasY, okY := num("y")
		if !okX || !okY {
			return nil, false
		}
		switch m {
		case frame.MotionMove, frame.MotionNudge:
			lo, hi := frame.MinMove, frame.MaxMove
			if m == frame.MotionNudge {
				lo, hi = math.MinInt8, math.MaxInt8
			}
			hx, hy := math.Round(x*100), math.Round(y*100)
			exact := math.Abs(hx-x*100) < 1e-6 && math.Abs(hy-y*100) < 1e-6
			if !hasX || !hasY || !exact || !whole(hx, lo, hi) || !whole(hy, lo, hi) {
				return nil, false
			}
			r.X, r.Y = int8(hx), int8(hy)
		default:
			if hasX || hasY {
				return nil, false
			}
		}
		for _, p := range []struct {
			key    string
			hi     int
			assign func(int)
		}{
			{"duration_ms", math.MaxUint16, func(v int) { r.DurationMS = uint16(v) }},
			{"range", math.MaxUint8, func(v int) { r.Range = uint8(v) }},
			{"count", math.MaxUint8, func(v int) { r.Count = uint8(v) }},
		} {
			v, present, ok := num(p.key)
			if !present {
				continue
			}
			if !ok || !whole(v, 1, p.hi) {
				return nil, false
			}
			p.assign(int(v))
		}
		if _, err := r.AppendBinary(nil); err != nil {
			return nil, false
		}
		return r, true
	}
	return nil, false
}
