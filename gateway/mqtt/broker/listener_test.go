package broker

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// connectPacket encodes a 3.1.1 CONNECT.
func connectPacket(t testing.TB, user, pass string) []byte {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, ClientIdentifier: "c",
			UsernameFlag: user != "", Username: []byte(user), PasswordFlag: pass != "", Password: []byte(pass)}}
	var b bytes.Buffer
	if err := pk.ConnectEncode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// header is a fixed header announcing n bytes.
func header(typ byte, n int) []byte {
	out := []byte{typ << 4}
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			out = append(out, c|0x80)
			continue
		}
		return append(out, c)
	}
}

func publishOf(n int) []byte {
	return append(header(packets.Publish, n), make([]byte, n)...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var testCfg = &guardConfig{maxPacket: 100, gateway: Credentials{Username: "@gw", Password: "pw"}}

// TestGuard: the framing check, fed whole and one byte at a time.
func TestGuard(t *testing.T) {
	user := connectPacket(t, "dash", "holo_x")
	bridge := connectPacket(t, "@gw", "pw")
	fake := connectPacket(t, "@gw", "guess")
	for _, tt := range []struct {
		name   string
		stream []byte
		ok     bool
	}{
		{"login then small packets", cat(user, publishOf(100), publishOf(0), header(packets.Pingreq, 0)), true},
		{"login then a big packet", cat(user, publishOf(101)), false},
		{"the bridge's big packet", cat(bridge, publishOf(10_000)), true},
		{"the bridge's name, a wrong password", cat(fake, publishOf(101)), false},
		{"first packet not CONNECT", publishOf(1), false},
		{"CONNECT announcing too much", header(packets.Connect, MaxConnect+1), false},
		{"CONNECT announcing 256 MB", []byte{0x10, 0xff, 0xff, 0xff, 0x7f}, false},
		{"a length of five bytes", cat(user, []byte{0x30, 0x80, 0x80, 0x80, 0x80, 0x01}), false},
		{"a header split anywhere", cat(user, header(packets.Publish, 100)), true},
		{"the limit's own bound", cat(user, header(packets.Publish, 128)), false},
	} {
		for _, chunk := range []int{0, 1} {
			g := &guard{cfg: testCfg, first: true}
			var err error
			if chunk == 0 {
				err = g.scan(tt.stream)
			} else {
				for i := 0; i < len(tt.stream) && err == nil; i++ {
					err = g.scan(tt.stream[i : i+1])
				}
			}
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, errFrame) {
				t.Errorf("%s (chunk %d): %v, want ok=%v", tt.name, chunk, err, tt.ok)
			}
		}
	}
}

// FuzzGuard: any stream, however it is cut, gets the same verdict, and
// nothing panics.
func FuzzGuard(f *testing.F) {
	f.Add(cat(connectPacket(f, "dash", "x"), publishOf(3)), uint8(3))
	f.Add(cat(connectPacket(f, "@gw", "pw"), publishOf(300)), uint8(7))
	f.Add([]byte{0x10, 0xff, 0xff, 0xff, 0x7f}, uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint8) {
		whole := (&guard{cfg: testCfg, first: true}).scan(stream)
		g := &guard{cfg: testCfg, first: true}
		var err error
		step := int(cut%16) + 1
		for i := 0; i < len(stream) && err == nil; i += step {
			err = g.scan(stream[i:min(i+step, len(stream))])
		}
		if (whole == nil) != (err == nil) {
			t.Fatalf("whole: %v, in pieces of %d: %v", whole, step, err)
		}
	})
}

// TestListenerBounds: no more connections than the bound are open at once,
// a connection that sends no CONNECT is closed after the timeout, and there
// is room again once connections went. Each part runs where the other
// cannot be the reason a connection closed: the bound under a timeout of a
// minute, the timeout with room to spare.
func TestListenerBounds(t *testing.T) {
	start := func(maxConns int64, timeout time.Duration) (*listener, func() net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := &listener{id: "t", ln: ln, cfg: *testCfg, maxConns: maxConns, connectTimeout: timeout,
			log: slog.New(slog.DiscardHandler)}
		// establish reads until the connection fails, as mochi does.
		go l.Serve(func(_ string, c net.Conn) error {
			_, err := io.Copy(io.Discard, c)
			c.Close()
			return err
		})
		t.Cleanup(func() { l.Close(func(string) {}) })
		return l, func() net.Conn {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	}
	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	waitOpen := func(l *listener, n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); l.open.Load() != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections open, want %d", l.open.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// The bound: a third connection is closed at once, the two others
	// are kept (their timeout is a minute away).
	l, dial := start(2, time.Minute)
	idle1, idle2 := dial(), dial()
	waitOpen(l, 2)
	if !closedWithin(dial(), 10*time.Second) {
		t.Error("a third connection was kept over a bound of two")
	}
	// Room again once they went.
	idle1.Close()
	idle2.Close()
	waitOpen(l, 0)
	c := dial()
	if _, err := c.Write(connectPacket(t, "dash", "x")); err != nil {
		t.Fatal(err)
	}
	if closedWithin(c, 100*time.Millisecond) {
		t.Error("a connection under the bound was closed")
	}

	// The timeout: connections that send no CONNECT are closed, though
	// the bound has room.
	_, dial = start(10, 200*time.Millisecond)
	idle1, idle2 = dial(), dial()
	if !closedWithin(idle1, 10*time.Second) || !closedWithin(idle2, 10*time.Second) {
		t.Fatal("connections without CONNECT were kept")
	}
}
