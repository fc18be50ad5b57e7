package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/gateway/auth"
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

// timedBusy is a line that tells when timed sends keep its wire
// (rs485.Line): a command would wait for a gap between them.
type timedBusy interface {
	TimedBusy() bool
}

// routesLocked lists the ways to run method on path on board b, best
// first: the line for paths the link serves, else the LAN (and the line
// after the LAN when both serve it). A line whose wire timed sends keep
// (a show's timed actions) comes after the LAN: a rollout or a console
// reaches a board that is on both without waiting for a gap in the show.
// Only places that reach the board now are listed.
func (f *Fleet) routesLocked(b *boardState, method, path string) ([]route, error) {
	served := jsonline.Served(method, path)
	var lineRoutes, lanRoutes, busyRoutes []route
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
			if !served {
				continue
			}
			if tb, ok := d.(timedBusy); ok && tb.TimedBusy() {
				busyRoutes = append(busyRoutes, route{d, ref.Addr, ViaRS485})
				continue
			}
			lineRoutes = append(lineRoutes, route{d, ref.Addr, ViaRS485})
			continue
		}
		lanRoutes = append(lanRoutes, route{d, ref.Addr, ViaLAN})
	}
	if len(lanRoutes) > 0 {
		onLineOnly = false
	}
	if served {
		return slices.Concat(lineRoutes, lanRoutes, busyRoutes), nil
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

// boardPath is the path a request sends: the canonical form of
// auth.CanonicalBoardPath (the one the decision read), without the API
// prefix. A path that is not canonical is never sent (auth.ErrBadPath):
// what the board would route could differ from what was authorised.
func boardPath(p string) (string, error) {
	send, _, err := auth.CanonicalBoardPath(p)
	if err != nil {
		return "", err
	}
	return send, nil
}

// Call implements Service: it runs one API request on the board by the
// transport that fits and returns the board's reply as it came. A board
// error (status 400 or more) is a Reply, not an error; errors are
// ErrUnknownBoard, ErrUnreachable, ErrNotOverLink, auth.ErrBadPath (a
// path not in canonical form) and the driver's
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
	path, err := boardPath(path)
	if err != nil {
		return Reply{}, "", err
	}
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

// groupSend is one group frame (or JSON line) on one line and the boards
// it reaches.
type groupSend struct {
	line    Line
	group   int // 0: every board on the line
	members []string
}

// Do implements Service. The action is prepared first (Prepare): a body
// any board would refuse is an ErrBadAction, a selector naming nothing or
// a group outside 1-31 an ErrBadSelector, and nothing is sent. Boards
// named by id, and boards picked by labels, are called one by one (concurrently, at most Concurrency at a time).
// Group and All selectors go out as one frame per line and group (group
// 0, every board, for All) where the action has a native form, else as
// one JSON line to the group; members no line reaches now are called one
// by one over the LAN. Each board appears once in the results, ordered by
// id; boards reached by a group frame report Via "group" and no reply. A
// board that refuses the action reports its error code in Error and its
// message in Message. An action with At is a timed fire (fire.go): every
// board changes at that moment; a fire time out of bounds is ErrBadTime.
func (f *Fleet) Do(ctx context.Context, sel Selector, a Action) ([]Result, error) {
	p, err := Prepare(sel, a, f.clk.Now())
	if err != nil {
		return nil, err
	}
	ab, a := p.Body, p.Resolved()
	req := ab.Request()
	body := req.Body
	sends, single, err := f.plan(sel)
	if err != nil {
		return nil, err
	}
	if p.Timed() {
		return f.doAt(ctx, a, ab, sends, single), nil
	}
	native, hasNative := ab.Native()

	results := map[string]Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var tasks []func()
	for _, ss := range perLine(sends) {
		tasks = append(tasks, func() {
			for _, s := range ss {
				var err error
				start := f.clk.Now()
				if hasNative {
					err = s.line.Group(ctx, s.group, native)
				} else {
					err = s.line.GroupCall(ctx, s.group, req.Method, req.Path, body)
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
		tasks = append(tasks, func() {
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
			rep, via, err := f.call(ctx, id, req.Method, req.Path, body)
			f.observe(via, a.Kind, start, err)
			r := Result{Board: id, Via: via, Reply: rep}
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Error, r.Message = boardRefusal(rep)
			}
			mu.Lock()
			results[id] = r
			mu.Unlock()
		})
	}
	runAll(&wg, tasks)
	out := make([]Result, 0, len(results))
	for _, id := range sortedKeys(results) {
		out = append(out, results[id])
	}
	return out, nil
}

// runAll runs tasks side by side and waits for them: the last in the
// calling goroutine, the others each in its own, so that an action for
// one line (a GO, a DMX change) costs no goroutine hand-over on its way
// to the wire.
func runAll(wg *sync.WaitGroup, tasks []func()) {
	for i, t := range tasks {
		if i == len(tasks)-1 {
			t()
		} else {
			wg.Go(t)
		}
	}
	wg.Wait()
}

// perLine groups sends by line: lines work in parallel; on one line the
// frames go one after the other, in order.
func perLine(sends []groupSend) map[string][]groupSend {
	out := map[string][]groupSend{}
	for _, s := range sends {
		out[s.line.Name()] = append(out[s.line.Name()], s)
	}
	return out
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
	if len(sel.Except) > 0 {
		ids = slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(sel.Except, id) })
	}
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
		if slices.Contains(sel.Except, id) {
			continue
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

// boardRefusal returns the board's error code and message when rep is an
// error reply (status 400 or more), else "", "".
func boardRefusal(rep Reply) (code, message string) {
	var e *boardapi.Error
	if !errors.As(rep.Err(), &e) {
		return "", ""
	}
	return e.Code, e.Message
}
