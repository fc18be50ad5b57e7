package rs485

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
)

// scriptBoard is a board reduced to its link event queue: it keeps every
// happening, hands its queue over on GET /link/events as a board does over
// the link, and follows a script of replies that go missing (loseFetch: the
// n-th plain fetch hands the queue over and its reply never comes) and of
// error replies (refuse: the first recovery fetch, GET /events or
// /link/events?after=, gets 404, as a garbled request line does).
//
// With lateFirstPing it answers its first PING only once the master has
// sent its next request to another address: after the master's wait, as
// a busy board does. pings lists the addresses of every PING it heard on
// the line, in order.
//
// It starts scenes (a SCENE frame, POST /scenes/apply) sent to it or to
// one of its groups, each giving a scene_started happening; missGroupScene
// is the n-th scene start sent to a group that it misses (lost on the
// line). scenes lists the starts it took: "group" or "addressed".
type scriptBoard struct {
	addr           int
	loseFetch      int
	lateFirstPing  bool
	groups         []int
	missGroupScene int

	groupScenes int // scene starts sent to its groups so far
	scenes      []string

	mu      sync.Mutex
	kept    []string // happening JSON; seq is index+1
	queue   int      // happenings at the end of kept not yet given
	fetches int      // plain GET /link/events so far
	refused bool
	log     []string
	pings   []int
	late    []byte // the first PING's reply, held until the master moves on
	pinged  bool
}

func (sb *scriptBoard) emit(n int) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for range n {
		sb.kept = append(sb.kept, fmt.Sprintf(`{"event":"touch","seq":%d,"x":1,"y":2}`, len(sb.kept)+1))
		sb.queue++
	}
}

// startScene takes a scene start (by: "group" or "addressed"), unless it
// is the group one the script misses. sb.mu held.
func (sb *scriptBoard) startScene(by string) {
	if by == "group" {
		sb.groupScenes++
		if sb.groupScenes == sb.missGroupScene {
			return
		}
	}
	sb.scenes = append(sb.scenes, by)
	sb.kept = append(sb.kept, fmt.Sprintf(`{"event":"scene_started","seq":%d,"name":"poster","slot":3}`, len(sb.kept)+1))
	sb.queue++
}

// inGroup reports whether sb is a member of group g.
func (sb *scriptBoard) inGroup(g int) bool { return slices.Contains(sb.groups, g) }

// events is a fetch reply body with the kept happenings after seq after.
func (sb *scriptBoard) events(after int) string {
	return fmt.Sprintf(`{"seq":%d,"lost":0,"pending":%d,"events":[%s]}`,
		len(sb.kept), sb.queue, strings.Join(sb.kept[min(after, len(sb.kept)):], ","))
}

// answer returns the reply to a JSON-line request, false for none. sb.mu held.
func (sb *scriptBoard) answer(req jsonline.Request) (int, string, bool) {
	path, query, _ := strings.Cut(req.Path, "?")
	sb.log = append(sb.log, req.Method+" "+req.Path)
	switch {
	case req.Method == "PATCH" && path == "/link/events":
		return 200, fmt.Sprintf(`{"kinds":[],"push":false,"seq":%d,"pending":%d}`, len(sb.kept), sb.queue), true
	case path == "/link" && req.Method == "GET":
		groups, _ := json.Marshal(append([]int{}, sb.groups...))
		return 200, fmt.Sprintf(`{"running":{"groups":%s}}`, groups), true
	case path == "/scenes/apply" && req.Method == "POST":
		sb.startScene("addressed")
		return 200, `{}`, true
	case path == "/link/events" && query == "":
		sb.fetches++
		from := len(sb.kept) - sb.queue
		sb.queue = 0
		return 200, sb.events(from), sb.fetches != sb.loseFetch
	case path == "/link/events" || path == "/events":
		if !sb.refused {
			sb.refused = true
			return 404, `{"error":"not_found","message":"garbled"}`, true
		}
		q, _ := url.ParseQuery(query)
		after, _ := strconv.Atoi(q.Get("after"))
		if path == "/link/events" {
			sb.queue = max(0, sb.queue-(len(sb.kept)-after))
		}
		return 200, sb.events(after), true
	}
	return 200, `{}`, true
}

// start runs sb on line until the test ends.
func (sb *scriptBoard) start(t *testing.T, line *simline.Line) {
	node, err := line.Attach(simline.NodeOptions{Name: "script"})
	if err != nil {
		t.Fatal(err)
	}
	recv := stream.New(stream.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); node.Close(); recv.Close(); <-done })
	go func() { _ = recv.Pump(ctx, node) }()
	go func() {
		defer close(done)
		for {
			it, err := recv.Next(ctx)
			if err != nil {
				return
			}
			var out []byte
			sb.mu.Lock()
			pending := sb.queue
			switch it.Kind {
			case stream.Frame:
				if len(it.Data) < 3 || frame.Type(it.Data[2]).IsReply() {
					break
				}
				if frame.Type(it.Data[2]) == frame.TypePing {
					sb.pings = append(sb.pings, int(it.Data[0]))
				}
				if a := frame.Address(it.Data[0]); a.IsGroup() && sb.inGroup(a.Group()) {
					if frame.Type(it.Data[2]) == frame.TypeScene {
						sb.startScene("group")
					}
					break
				}
				if int(it.Data[0]) != sb.addr {
					out, sb.late = sb.late, nil
					break
				}
				if frame.Type(it.Data[2]) == frame.TypeScene {
					sb.startScene("addressed")
					pending = sb.queue
				}
				h := frame.Header{Pending: uint8(pending)}
				switch typ := frame.Type(it.Data[2]); typ {
				case frame.TypeScene:
					out, _ = frame.AppendReply(out, frame.Address(sb.addr), it.Data[1], typ, h, &frame.Empty{})
				case frame.TypePing:
					out, _ = frame.AppendReply(out, frame.Address(sb.addr), it.Data[1], typ, h, &frame.PingReply{Protocol: 1, UptimeS: 5})
					if sb.lateFirstPing && !sb.pinged {
						out, sb.late = nil, out
					}
					sb.pinged = true
				case frame.TypeStatus:
					blk := frame.StatusBlock{Seq: uint16(len(sb.kept))}
					out, _ = frame.AppendReply(out, frame.Address(sb.addr), it.Data[1], typ, h, &frame.StatusReply{Block: blk})
				}
			case stream.Line:
				req, err := jsonline.ParseRequest(it.Data)
				if err == nil && req.Addr.Kind == jsonline.GroupAddr && sb.inGroup(int(req.Addr.N)) {
					if req.Method == "POST" && req.Path == "/scenes/apply" {
						sb.startScene("group")
					}
					break
				}
				if err != nil || int(req.Addr.N) != sb.addr || req.Addr.Kind != jsonline.BoardAddr {
					break
				}
				if status, body, ok := sb.answer(req); ok {
					out = jsonline.AppendReply(out, jsonline.Reply{Addr: req.Addr, Tag: req.Tag, Status: status, Pending: sb.queue, Body: []byte(body)})
				}
			}
			sb.mu.Unlock()
			if len(out) > 0 {
				if _, err := node.Write(out); err != nil {
					return
				}
			}
		}
	}()
}

// TestLostFetchReply: a GET /link/events whose reply is lost has handed the
// board's queue over; the master must read those happenings again from the
// kept ones (GET /events, or /link/events?after=), not fetch the queue again
// in place, and an error reply to that read does not end it.
func TestLostFetchReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // happenings fetched before the lost fetch
		lose   int // which plain fetch loses its reply
	}{
		{"first fetch", 0, 1},
		{"later fetch", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := newLine(t, simline.Faults{})
			sb := &scriptBoard{addr: 7, loseFetch: tc.lose}
			sb.start(t, line)
			l, sink := startMaster(t, line, Options{Addresses: []int{7}, PollInterval: 10 * time.Millisecond, PollWait: 100 * time.Millisecond})
			sink.Wait(t, 20*time.Second, "seen with states", func(s *recSink) bool { return len(s.States["7"]) >= 5 })
			if tc.before > 0 {
				sb.emit(tc.before)
				sink.Wait(t, 5*time.Second, "first happenings", func(s *recSink) bool { return len(s.Hs["7"]) >= tc.before })
			}
			sb.emit(3)
			sink.Wait(t, 10*time.Second, "every happening", func(s *recSink) bool { return len(s.Hs["7"]) >= tc.before+3 })
			afterPolls(t, l, 4) // a repeat would have come by then
			sink.Mu.Lock()
			defer sink.Mu.Unlock()
			fleettest.CheckOrder(t, sink.Hs["7"], 1, tc.before+3)
			sb.mu.Lock()
			defer sb.mu.Unlock()
			if !sb.refused || sb.fetches < tc.lose {
				t.Fatalf("script not played out: refused %v, %d fetches; requests %v", sb.refused, sb.fetches, sb.log)
			}
			// Kept happenings are read for the master's kinds only.
			for _, r := range sb.log {
				if strings.HasPrefix(r, "GET /events") && r != "GET /events?kinds="+strings.Join(HappeningKinds, ",") {
					t.Errorf("kept happenings read with %q", r)
				}
			}
		})
	}
}
