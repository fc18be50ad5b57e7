package lan

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// FuzzStream feeds arbitrary bytes to the SSE reader: it never panics,
// and every happening it reports is numbered after the one before.
func FuzzStream(f *testing.F) {
	f.Add("retry: 3000\n\nevent: touch\ndata: {\"event\":\"touch\",\"seq\":1}\nid: 1\n\n")
	f.Add("event: leds\ndata: {\"event\":\"leds\",\"state\":{\"mode\":\"off\"}}\n\n: keep-alive\n\n")
	f.Add("event: x\ndata: {\ndata: }\nid: 65535\n\nevent: y\ndata: {}\nid: 1\n\n")
	f.Add("id: 0\ndata: [1]\n\nid: 70000\ndata: {}\n\n\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		sink := newRecSink()
		w := &watcher{l: New(Options{}), b: &lanBoard{url: "http://x"}, sink: sink, parent: context.Background()}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w.follow(ctx, cancel, &http.Response{Body: io.NopCloser(strings.NewReader(in))})
		var last uint16
		for _, h := range sink.Hs[""] {
			if !fleet.SeqAfter(h.Seq, last) {
				t.Fatalf("seq %d after %d", h.Seq, last)
			}
			last = h.Seq
		}
	})
}
