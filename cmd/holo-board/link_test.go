package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/serialport"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link/linktest"
)

var linkOnRE = regexp.MustCompile(`holo-board link on (\S+)`)

// TestLinkOverPtyThroughSerial runs the link conformance table against the
// real binary with --uart pty, the host side opening the pty through
// go.bug.st/serial as it would open a USB serial adapter.
func TestLinkOverPtyThroughSerial(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "", "--uart", "pty")
	path := b.AwaitOutput(t, linkOnRE, 30*time.Second)
	port, err := serialport.Open(path, serialport.Config{Baud: 115200})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	recv := stream.New(stream.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = recv.Pump(ctx, port) }()
	next := func() (stream.Item, bool) {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		it, err := recv.Next(c)
		if err != nil {
			return stream.Item{}, false
		}
		return stream.Item{Kind: it.Kind, Data: append([]byte(nil), it.Data...)}, true
	}
	reply := func(line string) jsonline.Reply {
		t.Helper()
		if _, err := port.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		for {
			it, ok := next()
			if !ok {
				t.Fatalf("no reply to %q", line)
			}
			if it.Kind != stream.Line || strings.HasPrefix(string(it.Data), "!") {
				continue // the ready event, pushed events
			}
			r, err := jsonline.ParseReply(it.Data)
			if err != nil {
				t.Fatalf("reply %q: %v", it.Data, err)
			}
			return r
		}
	}
	for _, tc := range linktest.Lines {
		r := reply(tc.Line)
		if r.Status != tc.Status {
			t.Errorf("%s: %q -> %d %s, want %d", tc.Name, tc.Line, r.Status, r.Body, tc.Status)
			continue
		}
		if err := linktest.SubsetMatch(r.Body, tc.Fields, tc.Keys); err != nil {
			t.Errorf("%s: %v", tc.Name, err)
		}
	}
	// A native PING through the same port.
	wire, _ := frame.AppendRequest(nil, 1, 42, &frame.PingRequest{})
	if _, err := port.Write(wire); err != nil {
		t.Fatal(err)
	}
	for {
		it, ok := next()
		if !ok {
			t.Fatal("no PING reply")
		}
		if it.Kind == stream.Frame && it.Data[1] == 42 && frame.Type(it.Data[2]) == frame.TypePing.Reply() {
			break
		}
	}
}
