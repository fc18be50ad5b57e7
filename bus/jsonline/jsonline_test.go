package jsonline

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
)

var requestVectors = []struct {
	name, line string
	want       Request
	wire       string // AppendRequest of want; "" means line itself
}{
	{"bare", "GET /info\n", Request{Method: "GET", Path: "/info"}, ""},
	{"no line feed", "GET /info", Request{Method: "GET", Path: "/info"}, "GET /info\n"},
	{"crlf", "GET /leds\r\n", Request{Method: "GET", Path: "/leds"}, "GET /leds\n"},
	{"board", "@5 GET /holo\n", Request{Addr: Board(5), Method: "GET", Path: "/holo"}, ""},
	{"board 223", "@223 GET /holo\n", Request{Addr: Board(223), Method: "GET", Path: "/holo"}, ""},
	{"group", "@g31 POST /scenes/end\n", Request{Addr: Group(31), Method: "POST", Path: "/scenes/end"}, ""},
	{"every board", "@* DELETE /screen\n", Request{Addr: All(), Method: "DELETE", Path: "/screen"}, ""},
	{"tag", "#a1 GET /settings\n", Request{Tag: "a1", Method: "GET", Path: "/settings"}, ""},
	{"tag 16", "#Az09_-Az09_-Az09 GET /link\n", Request{Tag: "Az09_-Az09_-Az09", Method: "GET", Path: "/link"}, ""},
	{"address and tag with body", `@3 #x PATCH /leds {"brightness":20}` + "\n",
		Request{Addr: Board(3), Tag: "x", Method: "PATCH", Path: "/leds", Body: json.RawMessage(`{"brightness":20}`)}, ""},
	{"query kept", "PUT /scenes/scene?name=intro {\"slot\":2}\n",
		Request{Method: "PUT", Path: "/scenes/scene?name=intro", Body: json.RawMessage(`{"slot":2}`)}, ""},
	{"prefix removed", "GET /api/v1/info\n", Request{Method: "GET", Path: "/info"}, "GET /info\n"},
	{"prefix and query", "DELETE /api/v1/scenes/scene?name=a\n", Request{Method: "DELETE", Path: "/scenes/scene?name=a"}, "DELETE /scenes/scene?name=a\n"},
	{"prefix alone", "GET /api/v1\n", Request{Method: "GET", Path: "/"}, "GET /\n"},
	{"prefix then query", "GET /api/v1?a=1\n", Request{Method: "GET", Path: "/?a=1"}, "GET /?a=1\n"},
	{"longer version kept", "GET /api/v10/info\n", Request{Method: "GET", Path: "/api/v10/info"}, ""},
	{"unserved path parses", "GET /fs/list?path=/\n", Request{Method: "GET", Path: "/fs/list?path=/"}, ""},
	{"extra spaces", "@2  #t  POST  /holo/motion  {\"motion\":\"wag\"}  \n",
		Request{Addr: Board(2), Tag: "t", Method: "POST", Path: "/holo/motion", Body: json.RawMessage(`{"motion":"wag"}`)},
		`@2 #t POST /holo/motion {"motion":"wag"}` + "\n"},
	{"body with spaces inside", `POST /scenes/apply { "name" : "a b" }` + "\n",
		Request{Method: "POST", Path: "/scenes/apply", Body: json.RawMessage(`{ "name" : "a b" }`)}, ""},
	{"utf-8 body", `POST /scenes/apply {"name":"été"}` + "\n",
		Request{Method: "POST", Path: "/scenes/apply", Body: json.RawMessage(`{"name":"été"}`)}, ""},
}

var cmpRaw = cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })

func TestParseRequest(t *testing.T) {
	for _, tt := range requestVectors {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseRequest(%q): %v", tt.line, err)
			}
			if diff := cmp.Diff(got, tt.want, cmpRaw); diff != "" {
				t.Errorf("ParseRequest (-got +want)\n%s", diff)
			}
			wire := tt.wire
			if wire == "" {
				wire = tt.line
			}
			if diff := cmp.Diff(string(AppendRequest(nil, tt.want)), wire); diff != "" {
				t.Errorf("AppendRequest (-got +want)\n%s", diff)
			}
			if err := tt.want.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	long := "GET /info {\"a\":\"" + strings.Repeat("x", MaxLine) + "\"}\n"
	tests := []struct {
		name, line string
		want       *boardapi.Error
		head       Request // address and tag kept for the error reply
	}{
		{"empty", "\n", nil, Request{}},
		{"empty crlf", "\r\n", nil, Request{}},
		{"lower-case method", "get /info", ErrBadRequest, Request{}},
		{"no method", "@4 #t /info", ErrBadRequest, Request{Addr: Board(4), Tag: "t"}},
		{"method only", "#t GET", ErrBadRequest, Request{Tag: "t"}},
		{"method and space", "GET ", ErrBadRequest, Request{}},
		{"unknown method", "@4 HEAD /info", ErrNotFound, Request{Addr: Board(4)}},
		{"path without slash", "GET info", ErrBadRequest, Request{}},
		{"control in path", "GET /in\x01fo", ErrBadRequest, Request{}},
		{"board 0", "@0 GET /info", ErrBadRequest, Request{}},
		{"board 224", "@224 GET /info", ErrBadRequest, Request{}},
		{"leading zero", "@05 GET /info", ErrBadRequest, Request{}},
		{"group 0", "@g0 GET /info", ErrBadRequest, Request{}},
		{"group 32", "@g32 GET /info", ErrBadRequest, Request{}},
		{"address alone", "@5", ErrBadRequest, Request{Addr: Board(5)}},
		{"empty tag", "# GET /info", ErrBadRequest, Request{}},
		{"tag 17", "#abcdefghijklmnopq GET /info", ErrBadRequest, Request{}},
		{"tag char", "@1 #a.b GET /info", ErrBadRequest, Request{Addr: Board(1)}},
		{"broken json", `#j PATCH /leds {"brightness":`, ErrBadRequest, Request{Tag: "j"}},
		{"array body", `PATCH /leds [1]`, ErrBadRequest, Request{}},
		{"string body", `PATCH /leds "x"`, ErrBadRequest, Request{}},
		{"two objects", `PATCH /leds {} {}`, ErrBadRequest, Request{}},
		{"not utf-8", "POST /scenes/apply {\"name\":\"\xff\"}", ErrBadRequest, Request{}},
		{"too large", "@9 #big " + long, ErrTooLarge, Request{Addr: Board(9), Tag: "big"}},
		{"1025 with lf", "GET /info " + strings.Repeat(" ", MaxLine-len("GET /info ")) + "\n", ErrTooLarge, Request{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tt.line))
			if tt.want == nil {
				if !errors.Is(err, ErrEmpty) {
					t.Fatalf("err = %v, want ErrEmpty", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			gotHead := Request{Addr: got.Addr, Tag: got.Tag}
			if diff := cmp.Diff(gotHead, tt.head, cmpRaw); diff != "" {
				t.Errorf("head (-got +want)\n%s", diff)
			}
		})
	}
}

func TestLineLimit(t *testing.T) {
	// 1024 bytes counting the line feed is the longest line taken.
	pad := func(n int, eol string) string {
		s := "GET /info"
		return s + strings.Repeat(" ", n-len(s)-len(eol)) + eol
	}
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{pad(1024, "\n"), true},
		{pad(1024, "\r\n"), true},
		{pad(1023, ""), true},
		{pad(1025, "\n"), false},
		{pad(1025, "\r\n"), false},
		{pad(1024, ""), false},
	} {
		_, err := ParseRequest([]byte(tt.line))
		if (err == nil) != tt.ok {
			t.Errorf("len %d: err = %v, want ok=%v", len(tt.line), err, tt.ok)
		}
	}
}

func TestErrorReply(t *testing.T) {
	req, err := ParseRequest([]byte("@g2 #q1 HEAD /info\n"))
	got := string(AppendReply(nil, ErrorReply(req, Board(7), err)))
	want := `@7 #q1 404 {"error":"not_found","message":"method HEAD is not served over the link"}` + "\n"
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	req, err = ParseRequest([]byte("#q2 PATCH /leds {\n"))
	got = string(AppendReply(nil, ErrorReply(req, Board(7), err)))
	want = `#q2 400 {"error":"bad_request","message":"body is not a JSON object"}` + "\n"
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	// Too long: only the start of the line was kept by the receiver.
	req = ParseHead([]byte("@3 #t9 POST /scenes/apply {\"name\":\"aaaa"))
	got = string(AppendReply(nil, ErrorReply(req, Address{}, ErrTooLarge)))
	want = `@3 #t9 413 {"error":"too_large","message":"too large"}` + "\n"
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	// Other errors are internal.
	got = string(ErrorBody(errors.New(`disk "x" failed`)))
	want = `{"error":"internal","message":"disk \"x\" failed"}`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
}

var replyVectors = []struct {
	name, line string
	want       Reply
	wire       string
}{
	{"ok", "200 {\"api\":1}\n", Reply{Status: 200, Body: json.RawMessage(`{"api":1}`)}, ""},
	{"no content", "204\n", Reply{Status: 204}, ""},
	{"pending", "@12 #a 200 +3 {}\n", Reply{Addr: Board(12), Tag: "a", Status: 200, Pending: 3, Body: json.RawMessage(`{}`)}, ""},
	{"pending no body", "#z 204 +1\n", Reply{Tag: "z", Status: 204, Pending: 1}, ""},
	{"array", "200 [1,2]\n", Reply{Status: 200, Body: json.RawMessage(`[1,2]`)}, ""},
	{"error", `@1 404 {"error":"not_found","message":"x"}` + "\r\n",
		Reply{Addr: Board(1), Status: 404, Body: json.RawMessage(`{"error":"not_found","message":"x"}`)},
		`@1 404 {"error":"not_found","message":"x"}` + "\n"},
	{"spaces", "202  +65535  {} \n", Reply{Status: 202, Pending: 65535, Body: json.RawMessage(`{}`)}, "202 +65535 {}\n"},
}

func TestParseReply(t *testing.T) {
	for _, tt := range replyVectors {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseReply([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseReply(%q): %v", tt.line, err)
			}
			if diff := cmp.Diff(got, tt.want, cmpRaw); diff != "" {
				t.Errorf("ParseReply (-got +want)\n%s", diff)
			}
			wire := tt.wire
			if wire == "" {
				wire = tt.line
			}
			if diff := cmp.Diff(string(AppendReply(nil, tt.want)), wire); diff != "" {
				t.Errorf("AppendReply (-got +want)\n%s", diff)
			}
		})
	}
	// 204 never carries a body, even when Reply has one.
	if got := string(AppendReply(nil, Reply{Status: 204, Body: json.RawMessage(`{}`)})); got != "204\n" {
		t.Errorf("AppendReply 204 = %q", got)
	}
}

func TestParseReplyErrors(t *testing.T) {
	for _, line := range []string{
		"20", "2000", "600 {}", "099", "abc", "@g1 200", "@* 200", "@0 200",
		"#bad.tag 200", "200 +0", "200 +", "200 +65536", "200 +01", "204 {}",
		"200 {", "200 \"x\"", "200 {} x", "GET /info", "200 {\"a\":\"\xff\"}",
	} {
		if _, err := ParseReply([]byte(line)); !errors.Is(err, ErrBadReply) {
			t.Errorf("ParseReply(%q) err = %v, want ErrBadReply", line, err)
		}
	}
	if _, err := ParseReply([]byte("\r\n")); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: err = %v", err)
	}
}

func TestEvent(t *testing.T) {
	body := json.RawMessage(`{"event":"touch","action":"down","x":10,"y":200,"seq":7,"t_ms":5120}`)
	line := AppendEvent(nil, body)
	if want := "! " + string(body) + "\n"; string(line) != want {
		t.Fatalf("AppendEvent = %q, want %q", line, want)
	}
	for _, in := range []string{string(line), "!" + string(body), "!  " + string(body) + " \r\n"} {
		got, err := ParseEvent([]byte(in))
		if err != nil {
			t.Fatalf("ParseEvent(%q): %v", in, err)
		}
		if diff := cmp.Diff(got, body, cmpRaw); diff != "" {
			t.Errorf("ParseEvent (-got +want)\n%s", diff)
		}
	}
	for _, in := range []string{"!", "! ", "! [1]", "! {", "? {}", "! {} {}"} {
		if _, err := ParseEvent([]byte(in)); !errors.Is(err, ErrBadEvent) {
			t.Errorf("ParseEvent(%q) err = %v, want ErrBadEvent", in, err)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		line                 string
		any, board, fromHost Kind
	}{
		{"", KindEmpty, KindEmpty, KindEmpty},
		{"\r\n", KindEmpty, KindEmpty, KindEmpty},
		{"! {}", KindEvent, KindEvent, KindUnknown},
		{"200 {}", KindReply, KindReply, KindUnknown},
		{"GET /info", KindRequest, KindUnknown, KindRequest},
		{"@5 200", KindReply, KindReply, KindRequest},
		{"@5 GET /info", KindRequest, KindReply, KindRequest},
		{"#t 204", KindReply, KindReply, KindRequest},
		{"@5 #t PATCH /leds {}", KindRequest, KindReply, KindRequest},
		{"@5", KindUnknown, KindReply, KindRequest},
		{"@5 x", KindUnknown, KindReply, KindRequest},
		{"get /info", KindUnknown, KindUnknown, KindUnknown},
		{"\x00\x01", KindUnknown, KindUnknown, KindUnknown},
	}
	for _, tt := range tests {
		if got := Classify([]byte(tt.line)); got != tt.any {
			t.Errorf("Classify(%q) = %v, want %v", tt.line, got, tt.any)
		}
		if got := ClassifyFromBoard([]byte(tt.line)); got != tt.board {
			t.Errorf("ClassifyFromBoard(%q) = %v, want %v", tt.line, got, tt.board)
		}
		if got := ClassifyFromHost([]byte(tt.line)); got != tt.fromHost {
			t.Errorf("ClassifyFromHost(%q) = %v, want %v", tt.line, got, tt.fromHost)
		}
	}
}

func TestServed(t *testing.T) {
	served := []string{
		"GET /info", "POST /restart",
		"GET /screen", "PATCH /screen", "DELETE /screen", "POST /screen/show", "GET /media", "GET /media/info",
		"GET /leds", "PATCH /leds",
		"GET /holo", "POST /holo/motion", "GET /servos", "POST /servos/move", "POST /servos/release",
		"GET /scenes", "PUT /scenes/scene", "DELETE /scenes/scene", "POST /scenes/apply", "POST /scenes/end",
		"GET /settings", "PATCH /settings", "DELETE /settings",
		"GET /events",
		"GET /link", "PATCH /link", "GET /link/events", "PATCH /link/events",
		"GET /time", "PUT /time",
		// query and prefix are ignored
		"PUT /scenes/scene?name=a", "GET /api/v1/info", "GET /events?after=3&kinds=touch",
	}
	notServed := []string{
		"POST /info", "GET /restart", "PUT /screen", "GET /fs", "GET /fs/list?path=/", "PUT /fs/file",
		"GET /ota", "PUT /ota/image", "POST /ota/pull", "GET /network", "GET /network/scan",
		"GET /web", "PATCH /web", "PUT /servos/calibration?id=1", "DELETE /servos/calibration",
		"PUT /servos/policy?id=1", "GET /openapi.json", "GET /scenes/scene", "GET /info/", "GET /",
		"HEAD /info", "get /info", "GET /api/v1", "GET /api/v10/info", "POST /time", "DELETE /time",
	}
	for _, s := range served {
		m, p, _ := strings.Cut(s, " ")
		if !Served(m, p) {
			t.Errorf("Served(%q) = false", s)
		}
	}
	for _, s := range notServed {
		m, p, _ := strings.Cut(s, " ")
		if Served(m, p) {
			t.Errorf("Served(%q) = true", s)
		}
	}
}

func TestAddress(t *testing.T) {
	for _, tt := range []struct {
		a      Address
		s      string
		native int // -1: none
	}{
		{Address{}, "", -1},
		{Board(1), "@1", 1},
		{Board(223), "@223", 223},
		{Group(1), "@g1", 224},
		{Group(31), "@g31", 254},
		{All(), "@*", 0},
		{Board(0), "@0", -1},
		{Group(32), "@g32", -1},
	} {
		if got := tt.a.String(); got != tt.s {
			t.Errorf("%+v.String() = %q, want %q", tt.a, got, tt.s)
		}
		b, ok := tt.a.Native()
		if tt.native < 0 {
			if ok {
				t.Errorf("%+v.Native() = %d, want none", tt.a, b)
			}
			continue
		}
		if !ok || int(b) != tt.native {
			t.Errorf("%+v.Native() = %d %v, want %d", tt.a, b, ok, tt.native)
		}
		if back := AddressFromNative(b); back != tt.a {
			t.Errorf("AddressFromNative(%d) = %+v, want %+v", b, back, tt.a)
		}
	}
	if got := AddressFromNative(255); got.IsSet() {
		t.Errorf("AddressFromNative(255) = %+v", got)
	}
}

func TestParseRequestAllocs(t *testing.T) {
	line := []byte(`@3 PATCH /leds {"brightness":20}` + "\n")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseRequest(line) }); n != 0 {
		t.Errorf("untagged request on a served path: %v allocations, want 0", n)
	}
	line = []byte(`@3 #a1 PATCH /leds {"brightness":20}` + "\n")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseRequest(line) }); n > 1 {
		t.Errorf("tagged request: %v allocations, want at most 1", n)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, tt := range requestVectors {
		f.Add([]byte(tt.line))
	}
	f.Add([]byte("@g2 #t HEAD /x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRequest(line)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("parsed %q into %+v that does not validate: %v", line, r, err)
		}
		wire := AppendRequest(nil, r)
		back, err := ParseRequest(wire)
		if err != nil {
			t.Fatalf("re-parse of %q (from %q): %v", wire, line, err)
		}
		if diff := cmp.Diff(back, r, cmpRaw); diff != "" {
			t.Fatalf("round trip of %q (-got +want)\n%s", line, diff)
		}
		_ = Classify(line)
	})
}

func FuzzParseReply(f *testing.F) {
	for _, tt := range replyVectors {
		f.Add([]byte(tt.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseReply(line)
		if err != nil {
			return
		}
		wire := AppendReply(nil, r)
		back, err := ParseReply(wire)
		if err != nil {
			t.Fatalf("re-parse of %q (from %q): %v", wire, line, err)
		}
		if diff := cmp.Diff(back, r, cmpRaw); diff != "" {
			t.Fatalf("round trip of %q (-got +want)\n%s", line, diff)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`! {"event":"ready","firmware":"1.0","protocol":1,"address":1}` + "\n"))
	f.Add([]byte("!{}"))
	f.Fuzz(func(t *testing.T, line []byte) {
		body, err := ParseEvent(line)
		if err != nil {
			return
		}
		back, err := ParseEvent(AppendEvent(nil, body))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", line, err)
		}
		if !bytes.Equal(back, body) {
			t.Fatalf("round trip of %q: got %q want %q", line, back, body)
		}
	})
}

func BenchmarkParseRequest(b *testing.B) {
	for _, bm := range []struct{ name, line string }{
		{"plain", "GET /info\n"},
		{"addressed body", `@3 PATCH /leds {"mode":"solid","colour":"#ff8000","brightness":20}` + "\n"},
		{"tagged body", `@3 #a17 PATCH /leds {"mode":"solid","colour":"#ff8000","brightness":20}` + "\n"},
		{"query", "@3 #a17 PUT /scenes/scene?name=intro {\"slot\":2,\"clip\":\"/clips/a.mov\"}\n"},
	} {
		line := []byte(bm.line)
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, err := ParseRequest(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendReply(b *testing.B) {
	r := Reply{Addr: Board(3), Tag: "a17", Status: 200, Pending: 2, Body: json.RawMessage(`{"mode":"solid","brightness":20}`)}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendReply(buf[:0], r)
	}
}
