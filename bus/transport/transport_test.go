package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/serialport"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/tcplink"
)

func open(t *testing.T, addr string) io.ReadWriteCloser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, addr)
	if err != nil {
		t.Fatalf("Open(%q): %v", addr, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func name(t *testing.T, s io.ReadWriteCloser) string {
	t.Helper()
	n, ok := s.(Namer)
	if !ok {
		t.Fatalf("%T has no PathName", s)
	}
	return n.PathName()
}

func exchange(t *testing.T, a, b io.ReadWriter) {
	t.Helper()
	for _, dir := range []struct {
		from io.Writer
		to   io.Reader
		msg  string
	}{{a, b, "\x00ping\x00"}, {b, a, "@1 200 {}\n"}} {
		if _, err := dir.from.Write([]byte(dir.msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(dir.msg))
		done := make(chan error, 1)
		go func() { _, err := io.ReadFull(dir.to, got); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %q", dir.msg)
		}
		if string(got) != dir.msg {
			t.Fatalf("got %q want %q", got, dir.msg)
		}
	}
}

func TestPtyThenSerial(t *testing.T) {
	board := open(t, "pty")
	path := name(t, board)
	host := open(t, "serial://"+path+"?baud=57600&parity=none&stopbits=1&timeout=1s")
	exchange(t, board, host)
	if name(t, host) != path {
		t.Errorf("serial PathName %q", name(t, host))
	}
	// The bare device path form.
	host.Close()
	host2 := open(t, path)
	exchange(t, board, host2)
}

func TestTCPListenAndDial(t *testing.T) {
	board := open(t, "tcp://127.0.0.1:0")
	addr := name(t, board)
	host := open(t, "tcp+dial://"+addr)
	// The board discards what it writes before the client is attached.
	srv := board.(*tcplink.Server)
	for deadline := time.Now().Add(5 * time.Second); !srv.Stats().Connected; {
		if time.Now().After(deadline) {
			t.Fatal("client never attached")
		}
		time.Sleep(time.Millisecond)
	}
	exchange(t, board, host)
}

func TestSimline(t *testing.T) {
	l, err := simline.New(simline.Config{Baud: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	path := filepath.Join(t.TempDir(), "hub.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- simline.ServeHub(ctx, l, ln) }()
	defer func() { cancel(); <-done }()
	a := open(t, "simline://"+path+"?name=gw")
	b := open(t, "simline://"+path+"?name=b1&echo=0")
	if name(t, a) != path {
		t.Errorf("PathName %q", name(t, a))
	}
	for l.Stats().Nodes != 2 {
		time.Sleep(time.Millisecond)
	}
	exchange(t, a, b)
}

func TestBadAddresses(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want error
	}{
		{"", ErrUnknownScheme},
		{"ttyUSB0", ErrUnknownScheme},
		{"udp://1.2.3.4:5", ErrUnknownScheme},
		{"http://x", ErrUnknownScheme},
		{"tcp://", ErrBadAddress},
		{"tcp://127.0.0.1:0/path", ErrBadAddress},
		{"tcp+dial://h:1?x=1", ErrBadAddress},
		{"serial://host/dev/tty", ErrBadAddress},
		{"serial://", ErrBadAddress},
		{"serial:///dev/ttyS0?baud=fast", ErrBadAddress},
		{"serial:///dev/ttyS0?parity=purple", ErrBadAddress},
		{"serial:///dev/ttyS0?stopbits=3", ErrBadAddress},
		{"serial:///dev/ttyS0?colour=red", ErrBadAddress},
		{"serial:///dev/ttyS0?timeout=soon", ErrBadAddress},
		{"simline://", ErrBadAddress},
		{"simline:///x.sock?echo=maybe", ErrBadAddress},
		{"simline:///x.sock?speed=1", ErrBadAddress},
		{"%zz://", ErrBadAddress},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			s, err := Open(context.Background(), tc.addr)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Errorf("Open(%q) = %v, want %v", tc.addr, err, tc.want)
			}
		})
	}
	// Errors from the transports themselves come through wrapped.
	if _, err := Open(context.Background(), "/nonexistent/tty"); !errors.Is(err, serialport.ErrOpen) {
		t.Errorf("missing device: %v", err)
	}
}

func TestSerialConfig(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  serialport.Config
	}{
		{"", serialport.Config{Baud: 115200, DataBits: 8}},
		{"baud=9600&databits=7&parity=even&stopbits=2&timeout=250ms",
			serialport.Config{Baud: 9600, DataBits: 7, Parity: serialport.ParityEven, StopBits: serialport.StopBits2, ReadTimeout: 250 * time.Millisecond}},
		{"rs485=1&rs485_before=1ms&rs485_after=2ms&rs485_rx_during_tx=true&rs485_rts_low=1",
			serialport.Config{Baud: 115200, DataBits: 8, RS485: serialport.RS485{Enabled: true, DelayBeforeSend: time.Millisecond, DelayAfterSend: 2 * time.Millisecond, ReceiveDuringSend: true, RTSActiveLow: true}}},
		{"rs485_required=1",
			serialport.Config{Baud: 115200, DataBits: 8, RS485: serialport.RS485{Enabled: true, Required: true}}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := serialConfig(q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

// FuzzParams checks the query decoders never panic and accept only
// values they can use.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"", "baud=9600&parity=even", "rs485=1&rs485_before=1ms", "name=b1&echo=1", "baud=x", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := url.ParseQuery(s)
		if err != nil {
			return
		}
		if cfg, err := serialConfig(q); err == nil && cfg.RS485.Required && !cfg.RS485.Enabled {
			t.Fatal("required RS485 left disabled")
		}
		nodeOptions(q)
	})
}
