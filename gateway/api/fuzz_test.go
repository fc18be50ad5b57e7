package api

import (
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// FuzzParseSelector: never panics; a parsed selector written back as
// "k=v,..." parses to the same labels.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "room=hall", "room=hall, row=2", "a=", "=x", "bad", "a/b.c-d_e=v=w", ",", "k=v,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseSelector(s)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var items []string
		for _, k := range keys {
			if strings.Contains(m[k], ",") {
				return // values with commas do not round-trip
			}
			items = append(items, k+"="+strings.TrimSpace(m[k]))
		}
		back, err := ParseSelector(strings.Join(items, ","))
		if err != nil || len(back) != len(m) {
			t.Fatalf("round trip of %q: %v %v", s, back, err)
		}
	})
}

// BenchmarkListBoards compares one ListBoards over gRPC with the same over
// REST (which goes through grpc-gateway and the in-process pipe).
func BenchmarkListBoards(b *testing.B) {
	g := startGateway(b)
	b.Run("grpc", func(b *testing.B) {
		ctx := g.ctx(b, "viewer")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.client.ListBoards(ctx, &fleetv1.ListBoardsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("GET", g.url+"/v1/boards", nil)
			req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
}

// FuzzRoutesAllow: any request path is answered without a panic; a path
// the table answers for matches a template segment by segment, and its
// methods are never empty.
func FuzzRoutesAllow(f *testing.F) {
	doc, err := OpenAPI()
	if err != nil {
		f.Fatal(err)
	}
	r, err := newRoutes(doc, fixedPaths...)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"/v1/boards", "/v1/boards/x", "/v1/boards/", "", "/", "//", "v1/boards", "/v1/rollouts/dry-run", "/metrics", "/v1/boards/a/labels/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		allow := r.allow(p)
		if allow == nil {
			return
		}
		if len(allow) == 0 || !strings.HasPrefix(p, "/") {
			t.Fatalf("%q: allow %v", p, allow)
		}
	})
}

// FuzzRestError: any status maps to a status code and a snake_case error
// without a panic; too_large is always 413.
func FuzzRestError(f *testing.F) {
	for _, m := range []string{"grpc: received message larger than max (8388620 vs. 4194304)", "x", "grpc: message after decompression larger than max (1 vs. 0)"} {
		f.Add(uint32(8), m)
	}
	f.Fuzz(func(t *testing.T, code uint32, msg string) {
		c, body := restError(status.New(codes.Code(code%20), msg))
		if c < 400 && code%20 != 0 || body.Error == "" && code%20 != 0 {
			t.Fatalf("%d %q: %d %+v", code, msg, c, body)
		}
		if body.Error == ReasonTooLarge && c != http.StatusRequestEntityTooLarge {
			t.Fatalf("too_large with %d", c)
		}
	})
}
