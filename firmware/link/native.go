package link

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/frame"
)

// handleFrame answers one native frame from UART or RS485. raw is the
// unstuffed frame with its CRC checked and removed (addr, seq, type,
// payload), as the receive stream hands it over.
func (srv *Server) handleFrame(ctx context.Context, raw []byte) {
	if len(raw) < frame.HeaderLen || len(raw) > frame.HeaderLen+frame.MaxPayload {
		return
	}
	f := frame.Frame{Addr: frame.Address(raw[0]), Seq: raw[1], Type: frame.Type(raw[2]), Payload: raw[3:]}
	if !f.Addr.Valid() {
		return
	}
	if f.Type.IsReply() || f.Type == frame.TypeEvent {
		srv.c.ignored.Add(1) // another board's reply or event on a shared line
		return
	}
	if !srv.reaches(f.Addr) {
		srv.c.notForUs.Add(1)
		return
	}
	h, body, after := srv.dispatch(ctx, f.Type, f.Payload)
	srv.lastStatus.Store(uint32(h.Status))
	if !srv.replies(f.Addr) {
		if after != nil {
			after()
		}
		return
	}
	if h.Status != frame.StatusOK {
		srv.c.errors.Add(1)
	}
	h.Pending = uint8(min(srv.events.pending(), 255))
	wire, err := frame.AppendReply(nil, srv.self, f.Seq, f.Type, h, body)
	if err != nil {
		srv.o.Log.Warn("link: encoding reply", "type", f.Type, "err", err)
		return
	}
	srv.c.replies.Add(1)
	srv.o.Port.send(wire)
	if after != nil {
		after()
	}
}

// dispatch runs one native request. Every message that changes the board
// runs through the same API handler as its HTTP form, so the effects and
// events are the same. after, when not nil, runs once the reply is sent
// (RESTART replies first).
func (srv *Server) dispatch(ctx context.Context, t frame.Type, payload []byte) (h frame.Header, body frame.Message, after func()) {
	msg, err := frame.ParseRequest(frame.Frame{Type: t, Payload: payload})
	if err != nil {
		if !t.Known() {
			srv.c.unknownType.Add(1)
			return frame.Header{Status: frame.StatusUnknownType}, nil, nil
		}
		return frame.Header{Status: frame.StatusBadRequest}, nil, nil
	}
	ok := frame.Header{Status: frame.StatusOK}
	switch m := msg.(type) {
	case *frame.PingRequest:
		return ok, &frame.PingReply{Protocol: frame.ProtocolVersion, UptimeS: uint32(srv.o.Uptime() / time.Second)}, nil
	case *frame.VersionRequest:
		v := srv.o.Version
		if len(v) > 32 {
			v = v[:32]
		}
		return ok, &frame.VersionReply{Version: v}, nil
	case *frame.StatusRequest:
		sb := srv.o.Status()
		sb.LastStatus = srv.LastStatus()
		return ok, &frame.StatusReply{Block: sb}, nil
	case *frame.EventsGetRequest:
		_, lost, hs := srv.events.take(m.After, 5, true)
		rep := &frame.EventsGetReply{Lost: uint8(min(lost, 255))}
		for _, hp := range hs {
			if rec, ok := recordOf(hp); ok {
				rep.Records = append(rep.Records, rec)
			}
		}
		return ok, rep, nil
	case *frame.EventsSetRequest:
		kinds := m.Kinds.Names()
		if kinds == nil {
			kinds = []string{}
		}
		srv.setEvents(kinds, m.Push, true)
		return ok, &frame.EventsSetReply{Seq: srv.o.Hub.Latest()}, nil
	case *frame.RestartRequest:
		status, b := srv.call(ctx, http.MethodPost, "/restart", []byte(`{}`), true)
		return frame.Header{Status: statusOf(status, b)}, &frame.Empty{}, nil
	}
	method, path, reqBody, err := httpForm(msg)
	if err != nil {
		return frame.Header{Status: frame.StatusBadRequest}, nil, nil
	}
	status, b := srv.call(ctx, method, path, reqBody, true)
	return frame.Header{Status: statusOf(status, b)}, &frame.Empty{}, nil
}

// httpForm is the API request a native message stands for.
func httpForm(msg frame.Message) (method, path string, body []byte, err error) {
	j := func(v any) []byte { b, _ := json.Marshal(v); return b }
	switch m := msg.(type) {
	case *frame.SceneRequest:
		path := "/scenes/apply"
		if m.ClipStartUS != 0 {
			path += "?" + boardapi.QueryClipStart + "=" + strconv.FormatInt(m.ClipStartUS, 10)
		}
		return http.MethodPost, path, j(map[string]int{"slot": int(m.Slot)}), nil
	case *frame.EndRequest:
		return http.MethodPost, "/scenes/end", nil, nil
	case *frame.ScreenOffRequest:
		return http.MethodDelete, "/screen", nil, nil
	case *frame.ColourRequest:
		return http.MethodPost, "/screen/show", j(map[string]string{"colour": fmt.Sprintf("#%02x%02x%02x", m.R, m.G, m.B)}), nil
	case *frame.BacklightRequest:
		return http.MethodPatch, "/screen", j(map[string]int{"backlight": int(m.Percent)}), nil
	case *frame.LEDsRequest:
		p := map[string]any{"loop": m.Flags&frame.LEDLoop != 0}
		if m.Mode != frame.LEDKeep {
			p["mode"] = boardapi.LEDModes[m.Mode]
		}
		if m.Flags&frame.LEDNewColour != 0 {
			p["colour"] = fmt.Sprintf("#%02x%02x%02x", m.R, m.G, m.B)
		}
		if m.Brightness != 0 {
			p["brightness"] = int(m.Brightness)
		}
		return http.MethodPatch, "/leds", j(p), nil
	case *frame.HoloRequest:
		p := map[string]any{"motion": m.Motion.String()}
		if m.Motion == frame.MotionMove || m.Motion == frame.MotionNudge {
			p["x"], p["y"] = float64(m.X)/100, float64(m.Y)/100
		}
		if m.DurationMS != 0 {
			p["duration_ms"] = int(m.DurationMS)
		}
		if m.Range != 0 {
			p["range"] = int(m.Range)
		}
		if m.Count != 0 {
			p["count"] = int(m.Count)
		}
		return http.MethodPost, "/holo/motion", j(p), nil
	}
	return "", "", nil, fmt.Errorf("link: no API form for %T", msg)
}
