package i2creg

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/frame"
)

// fakeBoard is a small I2C target that answers like a board: PING,
// STATUS and SCENE commands, the STATUS, EVENT and VERSION registers, and
// a RESULT that reads "still working" a set number of times first.
type fakeBoard struct {
	mu       sync.Mutex
	general  bool
	working  int // RESULT reads left that answer StatusWorking
	last     Command
	result   []byte
	events   []frame.Record
	commands []Command
}

func (f *fakeBoard) GeneralCall() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.general
}

func (f *fakeBoard) Write(reg Register, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if reg != RegCommand {
		return errors.New("fake: register is read-only")
	}
	var c Command
	if err := c.UnmarshalBinary(data); err != nil {
		return err
	}
	f.last = c
	f.commands = append(f.commands, c)
	h := frame.Header{Pending: uint8(len(f.events))}
	var body frame.Message
	switch c.Type {
	case frame.TypePing:
		body = &frame.PingReply{Protocol: frame.ProtocolVersion, UptimeS: 42}
	case frame.TypeScene:
		var r frame.SceneRequest
		switch {
		case r.UnmarshalBinary(c.Payload) != nil:
			h.Status = frame.StatusBadRequest
		case r.Slot != 1:
			h.Status = frame.StatusNotFound
		}
	default:
		h.Status = frame.StatusUnknownType
	}
	var err error
	f.result, err = AppendResult(nil, c.Seq, c.Type, h, body)
	return err
}

func (f *fakeBoard) Read(reg Register, n int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch reg {
	case RegStatus:
		return StatusReg{Protocol: 1, Pending: uint8(len(f.events)), Block: frame.StatusBlock{Remaining: frame.NoRemaining, Brightness: 30}}.AppendBinary(nil)
	case RegResult:
		if f.working > 0 {
			f.working--
			return AppendResult(nil, f.last.Seq, f.last.Type, frame.Header{Status: frame.StatusWorking}, nil)
		}
		return f.result, nil
	case RegEvent:
		if len(f.events) == 0 {
			return frame.Record{}.AppendBinary(nil)
		}
		r := f.events[0]
		f.events = f.events[1:]
		return r.AppendBinary(nil)
	case RegVersion:
		return Version("9.9.9-fake").AppendBinary(nil)
	}
	return nil, errors.New("fake: no such register")
}

// plainTarget knows nothing of general call.
type plainTarget struct{ writes int }

func (p *plainTarget) Write(Register, []byte) error       { p.writes++; return nil }
func (p *plainTarget) Read(Register, int) ([]byte, error) { return nil, nil }

func TestBusExchange(t *testing.T) {
	ctx := context.Background()
	bus := NewBus()
	board := &fakeBoard{working: 2, events: []frame.Record{{Kind: frame.KindTouch, Seq: 1, X: 5, Y: 6}}}
	if err := bus.Attach(DefaultAddress, board); err != nil {
		t.Fatal(err)
	}

	cmd, err := AppendCommand(nil, 9, frame.PingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Write(ctx, DefaultAddress, RegCommand, cmd); err != nil {
		t.Fatal(err)
	}
	var res Result
	polls := 0
	for {
		polls++
		raw, err := bus.Read(ctx, DefaultAddress, RegResult, MaxResultLen)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != MaxResultLen {
			t.Fatalf("read %d bytes, want %d", len(raw), MaxResultLen)
		}
		if err := res.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		if res.Status != frame.StatusWorking {
			break
		}
	}
	if polls != 3 {
		t.Errorf("polled %d times, want 3", polls)
	}
	var ping frame.PingReply
	if err := ping.UnmarshalBinary(res.Payload); err != nil {
		t.Fatal(err)
	}
	got := []any{res.Seq, res.Type, res.Header(), ping}
	want := []any{uint8(9), frame.TypePing.Reply(), frame.Header{Pending: 1}, frame.PingReply{Protocol: 1, UptimeS: 42}}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("PING result (-got +want):\n%s", d)
	}

	raw, err := bus.Read(ctx, DefaultAddress, RegStatus, StatusLen)
	if err != nil {
		t.Fatal(err)
	}
	var st StatusReg
	if err := st.UnmarshalBinary(raw); err != nil || st.Protocol != 1 || st.Pending != 1 || st.Block.Brightness != 30 {
		t.Errorf("STATUS = %+v, %v", st, err)
	}

	for i, want := range []frame.Record{{Kind: frame.KindTouch, Seq: 1, X: 5, Y: 6}, {}} {
		raw, err := bus.Read(ctx, DefaultAddress, RegEvent, EventLen)
		if err != nil {
			t.Fatal(err)
		}
		var r frame.Record
		if err := r.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(r, want); d != "" {
			t.Errorf("EVENT read %d (-got +want):\n%s", i, d)
		}
	}

	raw, err = bus.Read(ctx, DefaultAddress, RegVersion, VersionLen)
	if err != nil {
		t.Fatal(err)
	}
	var v Version
	if err := v.UnmarshalBinary(raw); err != nil || v != "9.9.9-fake" {
		t.Errorf("VERSION = %q, %v", v, err)
	}

	// A register the target does not serve reads as an error, a short
	// answer is padded.
	if _, err := bus.Read(ctx, DefaultAddress, 0x55, 4); err == nil {
		t.Error("read of an unknown register succeeded")
	}
	raw, err = bus.Read(ctx, DefaultAddress, RegVersion, 40)
	if err != nil || raw[31] != 0 || raw[32] != Pad || raw[39] != Pad {
		t.Errorf("long read = % X, %v", raw, err)
	}
	if err := bus.Write(ctx, DefaultAddress, RegStatus, []byte{1}); err == nil {
		t.Error("write to STATUS succeeded")
	}
}

func TestBusAddressing(t *testing.T) {
	ctx := context.Background()
	bus := NewBus()
	on := &fakeBoard{general: true}
	off := &fakeBoard{}
	plain := &plainTarget{}
	for addr, tg := range map[uint8]Target{0x42: on, 0x43: off, 0x44: plain} {
		if err := bus.Attach(addr, tg); err != nil {
			t.Fatal(err)
		}
	}
	if err := bus.Attach(0x42, &fakeBoard{}); !errors.Is(err, ErrAddressInUse) {
		t.Errorf("second target at 0x42: %v", err)
	}
	for _, a := range []uint8{GeneralCall, 0x07, 0x78, 0xFF} {
		if err := bus.Attach(a, &fakeBoard{}); !errors.Is(err, ErrAddress) {
			t.Errorf("Attach(0x%02X) = %v, want ErrAddress", a, err)
		}
	}

	cmd, _ := AppendCommand(nil, 1, frame.SceneRequest{Slot: 1})
	if err := bus.Write(ctx, 0x50, RegCommand, cmd); !errors.Is(err, ErrNoAck) {
		t.Errorf("write to an empty address = %v", err)
	}
	if _, err := bus.Read(ctx, 0x50, RegStatus, StatusLen); !errors.Is(err, ErrNoAck) {
		t.Errorf("read from an empty address = %v", err)
	}
	if err := bus.Write(ctx, 0x80, RegCommand, cmd); !errors.Is(err, ErrAddress) {
		t.Errorf("write to 0x80 = %v", err)
	}
	for _, n := range []int{0, MaxRead + 1} {
		if _, err := bus.Read(ctx, 0x42, RegStatus, n); !errors.Is(err, ErrReadLength) {
			t.Errorf("read of %d bytes = %v", n, err)
		}
	}

	// General call: only the target that has it on hears the command.
	if err := bus.Write(ctx, GeneralCall, RegCommand, cmd); err != nil {
		t.Fatal(err)
	}
	if len(on.commands) != 1 || len(off.commands) != 0 || plain.writes != 0 {
		t.Errorf("general call reached %d, %d, %d targets' writes; want 1, 0, 0", len(on.commands), len(off.commands), plain.writes)
	}
	if _, err := bus.Read(ctx, GeneralCall, RegResult, MaxResultLen); !errors.Is(err, ErrGeneralCallRead) {
		t.Errorf("read from general call = %v", err)
	}
	// A refusal by a listener is reported.
	if err := bus.Write(ctx, GeneralCall, RegCommand, []byte{1, 2, 3, 4}); !errors.Is(err, frame.ErrBadCRC) {
		t.Errorf("general call with a bad command = %v", err)
	}
	off.general = true
	if err := bus.Write(ctx, GeneralCall, RegCommand, cmd); err != nil || len(off.commands) != 1 {
		t.Errorf("after enabling: %v, %d commands", err, len(off.commands))
	}
	bus.Detach(0x42)
	bus.Detach(0x43)
	bus.Detach(0x43)
	if err := bus.Write(ctx, GeneralCall, RegCommand, cmd); !errors.Is(err, ErrNoAck) {
		t.Errorf("general call with no listener = %v", err)
	}
}

func TestBusCopiesData(t *testing.T) {
	bus := NewBus()
	board := &fakeBoard{}
	if err := bus.Attach(0x42, board); err != nil {
		t.Fatal(err)
	}
	cmd, _ := AppendCommand(nil, 1, frame.SceneRequest{Slot: 1})
	if err := bus.Write(context.Background(), 0x42, RegCommand, cmd); err != nil {
		t.Fatal(err)
	}
	cmd[2] = 99 // the caller reuses its buffer
	if board.commands[0].Payload[0] != 1 {
		t.Error("target sees the caller's buffer")
	}
}

func TestBusContext(t *testing.T) {
	bus := NewBus()
	if err := bus.Attach(0x42, &fakeBoard{}); err != nil {
		t.Fatal(err)
	}
	bus.turn <- struct{}{} // another transaction holds the bus
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := bus.Write(ctx, 0x42, RegCommand, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Write on a busy bus = %v", err)
	}
	if _, err := bus.Read(ctx, 0x42, RegStatus, StatusLen); !errors.Is(err, context.Canceled) {
		t.Errorf("Read on a busy bus = %v", err)
	}
	<-bus.turn
	if _, err := bus.Read(context.Background(), 0x42, RegStatus, StatusLen); err != nil {
		t.Errorf("Read on a free bus = %v", err)
	}
}

func TestBusConcurrent(t *testing.T) {
	bus := NewBus()
	boards := []*fakeBoard{{}, {}, {}}
	for i, b := range boards {
		if err := bus.Attach(uint8(0x40+i), b); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range boards {
		wg.Go(func() {
			addr := uint8(0x40 + i)
			for seq := range 50 {
				cmd, _ := AppendCommand(nil, uint8(seq), frame.PingRequest{})
				if err := bus.Write(context.Background(), addr, RegCommand, cmd); err != nil {
					t.Error(err)
					return
				}
				raw, err := bus.Read(context.Background(), addr, RegResult, MaxResultLen)
				if err != nil {
					t.Error(err)
					return
				}
				var r Result
				if err := r.UnmarshalBinary(raw); err != nil || r.Seq != uint8(seq) {
					t.Errorf("board 0x%02X: %+v, %v", addr, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
