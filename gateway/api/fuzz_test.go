package api

import (
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

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
