package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkHappened: one happening reported, deduplicated, numbered,
// buffered and handed to 4 watchers (one per board filter and one for all).
func BenchmarkHappened(b *testing.B) {
	f := New(Options{})
	ref := Ref{Driver: "lan", Addr: "http://b1"}
	f.Seen(ref, json.RawMessage(`{"id":"b1"}`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ws []*Watcher
	for i := range 4 {
		flt := Filter{}
		if i > 0 {
			flt.IDs = []string{"b1"}
		}
		ws = append(ws, f.Watch(ctx, flt, 0))
	}
	hs := []Happening{{Kind: "touch", Data: json.RawMessage(`{"action":"down","x":1,"y":2}`)}}
	b.ReportAllocs()
	seq := uint16(0)
	for b.Loop() {
		seq = seq%65535 + 1
		hs[0].Seq = seq
		f.Happened(ref, hs)
		for _, w := range ws {
			<-w.C
		}
	}
}

// BenchmarkBoards lists 1,000 boards filtered by group.
func BenchmarkBoards(b *testing.B) {
	f := New(Options{})
	for i := range 1000 {
		ref := Ref{Driver: "lan", Addr: fmt.Sprintf("http://b%d", i)}
		f.Seen(ref, json.RawMessage(fmt.Sprintf(`{"id":"b%04d"}`, i)))
		f.Changed(ref, "link", json.RawMessage(fmt.Sprintf(`{"running":{"groups":[%d]}}`, i%8+1)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(f.Boards(Filter{Group: 3})); n != 125 {
			b.Fatalf("%d boards", n)
		}
	}
}
