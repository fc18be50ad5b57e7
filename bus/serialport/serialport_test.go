package serialport_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/pty"
	"github.com/holofleet/holofleet/bus/serialport"
)

// openPair makes a pty and opens its slave through serialport, the same
// code path a real /dev/ttyUSB0 takes.
func openPair(t *testing.T, cfg serialport.Config) (*pty.Pty, *serialport.Port) {
	t.Helper()
	m, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	p, err := serialport.Open(m.SlavePath(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return m, p
}

// every byte value, including the ones a cooked tty would eat or rewrite.
func allBytes() []byte {
	b := make([]byte, 0, 512)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return append(b, 0x00, 0x0D, 0x0A, 0x03, 0x11, 0x13, 0x7F, 0x04)
}

func readFull(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	got := make([]byte, n)
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, got); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("read of %d bytes timed out", n)
	}
	return got
}

func TestPtyRoundTrip(t *testing.T) {
	m, p := openPair(t, serialport.Config{Baud: 115200})
	want := allBytes()

	// host -> board
	if _, err := p.Write(want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readFull(t, m, len(want)), want); diff != "" {
		t.Errorf("serialport->master (-got +want)\n%s", diff)
	}
	// board -> host
	if _, err := m.Write(want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readFull(t, p, len(want)), want); diff != "" {
		t.Errorf("master->serialport (-got +want)\n%s", diff)
	}
}

func TestPtyLargeTransfer(t *testing.T) {
	m, p := openPair(t, serialport.Config{Baud: 1000000})
	want := bytes.Repeat(allBytes(), 200) // ~100 KB, more than the tty queues
	go func() { m.Write(want) }()
	if got := readFull(t, p, len(want)); !bytes.Equal(got, want) {
		t.Fatal("large transfer corrupted")
	}
}

func TestReadTimeout(t *testing.T) {
	_, p := openPair(t, serialport.Config{ReadTimeout: 20 * time.Millisecond})
	start := time.Now()
	n, err := p.Read(make([]byte, 8))
	if n != 0 || !errors.Is(err, serialport.ErrTimeout) {
		t.Fatalf("Read = %d, %v; want 0, ErrTimeout", n, err)
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Errorf("timed out after %v, before the 20ms timeout", el)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	_, p := openPair(t, serialport.Config{})
	done := make(chan error, 1)
	go func() {
		_, err := p.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, serialport.ErrClosed) {
			t.Fatalf("Read after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if _, err := p.Write([]byte{1}); !errors.Is(err, serialport.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}

func TestRS485OnPty(t *testing.T) {
	m, err := pty.Open()
	if err != nil {
		t.Skip(err)
	}
	defer m.Close()
	// A pty has no RS485 mode: optional RS485 opens and reports why.
	p, err := serialport.Open(m.SlavePath(), serialport.Config{RS485: serialport.RS485{Enabled: true, DelayBeforeSend: time.Millisecond}})
	if err != nil {
		t.Fatalf("optional RS485: %v", err)
	}
	if !errors.Is(p.RS485Err(), serialport.ErrRS485Unsupported) {
		t.Errorf("RS485Err = %v, want ErrRS485Unsupported", p.RS485Err())
	}
	p.Close()
	// Required RS485 fails the open.
	_, err = serialport.Open(m.SlavePath(), serialport.Config{RS485: serialport.RS485{Enabled: true, Required: true}})
	if !errors.Is(err, serialport.ErrRS485Unsupported) {
		t.Errorf("required RS485: %v, want ErrRS485Unsupported", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  serialport.Config
	}{
		{"negative baud", serialport.Config{Baud: -1}},
		{"data bits 9", serialport.Config{DataBits: 9}},
		{"parity 9", serialport.Config{Parity: 9}},
		{"stop bits 7", serialport.Config{StopBits: 7}},
		{"negative timeout", serialport.Config{ReadTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serialport.Open("/dev/null-not-used", tc.cfg)
			if !errors.Is(err, serialport.ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
		})
	}
	if _, err := serialport.Open("/nonexistent/tty", serialport.Config{}); !errors.Is(err, serialport.ErrOpen) {
		t.Errorf("missing device: %v, want ErrOpen", err)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]serialport.Parity{"": serialport.ParityNone, "none": serialport.ParityNone, "odd": serialport.ParityOdd, "E": serialport.ParityEven, "mark": serialport.ParityMark, "space": serialport.ParitySpace} {
		got, err := serialport.ParseParity(in)
		if err != nil || got != want {
			t.Errorf("ParseParity(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := serialport.ParseParity("purple"); !errors.Is(err, serialport.ErrConfig) {
		t.Errorf("bad parity: %v", err)
	}
	for in, want := range map[string]serialport.StopBits{"1": serialport.StopBits1, "1.5": serialport.StopBits1Half, "2": serialport.StopBits2} {
		got, err := serialport.ParseStopBits(in)
		if err != nil || got != want {
			t.Errorf("ParseStopBits(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := serialport.ParseStopBits("3"); !errors.Is(err, serialport.ErrConfig) {
		t.Errorf("bad stop bits: %v", err)
	}
}
