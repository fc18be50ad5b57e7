package link

import (
	"context"
	"sync"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
)

// i2cTarget is the board as an I2C target: a write to COMMAND starts the
// command once the write ends; RESULT reads "still working" (0xFE) until
// it is done. STATUS, EVENT and VERSION answer at once.
type i2cTarget struct {
	srv *Server

	mu      sync.Mutex
	result  []byte // RESULT register contents, nil before the first command
	working bool
	seq     uint8
	typ     frame.Type
}

func newI2CTarget(srv *Server) *i2cTarget { return &i2cTarget{srv: srv} }

// GeneralCall reports whether the board answers commands to address 0.
func (t *i2cTarget) GeneralCall() bool { return t.srv.running.GeneralCall }

// Write handles a write transaction.
func (t *i2cTarget) Write(reg i2creg.Register, data []byte) error {
	if reg != i2creg.RegCommand {
		return nil // writes to read-only registers are ignored
	}
	var cmd i2creg.Command
	if err := cmd.UnmarshalBinary(data); err != nil {
		// A corrupted command is never run. The result tells the host.
		t.mu.Lock()
		t.result, _ = i2creg.AppendResult(nil, 0, 0, frame.Header{Status: frame.StatusBadRequest}, nil)
		t.working = false
		t.mu.Unlock()
		return nil
	}
	t.srv.c.i2cCommands.Add(1)
	t.mu.Lock()
	if t.working {
		t.mu.Unlock()
		// One command at a time: a host that writes again before the
		// result is ready is told busy for the new command.
		return nil
	}
	t.working, t.seq, t.typ = true, cmd.Seq, cmd.Type
	t.mu.Unlock()
	payload := append([]byte(nil), cmd.Payload...)
	t.srv.wg.Add(1)
	go func() {
		defer t.srv.wg.Done()
		h, body, after := t.srv.dispatch(context.Background(), cmd.Type, payload)
		t.srv.lastStatus.Store(uint32(h.Status))
		h.Pending = uint8(min(t.srv.events.pending(), 255))
		res, err := i2creg.AppendResult(nil, cmd.Seq, cmd.Type, h, body)
		if err != nil {
			res, _ = i2creg.AppendResult(nil, cmd.Seq, cmd.Type, frame.Header{Status: frame.StatusFailed, Pending: h.Pending}, nil)
		}
		t.mu.Lock()
		t.result, t.working = res, false
		t.mu.Unlock()
		if after != nil {
			after()
		}
	}()
	return nil
}

// Read handles a read transaction.
func (t *i2cTarget) Read(reg i2creg.Register, n int) ([]byte, error) {
	switch reg {
	case i2creg.RegStatus:
		sb := t.srv.o.Status()
		sb.LastStatus = t.srv.LastStatus()
		return i2creg.StatusReg{Protocol: frame.ProtocolVersion, Block: sb,
			Pending: uint8(min(t.srv.events.pending(), 255))}.AppendBinary(nil)
	case i2creg.RegResult:
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.working {
			return i2creg.AppendResult(nil, t.seq, t.typ, frame.Header{Status: frame.StatusWorking}, nil)
		}
		return t.result, nil
	case i2creg.RegEvent:
		hp, ok := t.srv.events.popOldest()
		if !ok {
			return make([]byte, frame.RecordLen), nil
		}
		rec, ok := recordOf(hp)
		if !ok {
			return make([]byte, frame.RecordLen), nil
		}
		return rec.AppendBinary(nil)
	case i2creg.RegVersion:
		v := t.srv.o.Version
		if len(v) > 32 {
			v = v[:32]
		}
		return i2creg.Version(v).AppendBinary(nil)
	}
	return nil, nil
}
