package link_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/firmware/link/linktest"
)

// rs485Line puts n boards (addresses 1..n; odd ones in group 1, all in
// group 2) on a simulated line and returns the master's node.
func rs485Line(t testing.TB, n int, faults simline.Faults) (*simline.Line, *simline.Node, []*testBoard) {
	t.Helper()
	line, err := simline.New(simline.Config{Baud: 115200, Seed: 7, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	var boards []*testBoard
	for i := 1; i <= n; i++ {
		dir := t.TempDir()
		s := link.DefaultSettings()
		s.Mode, s.Address, s.Groups = link.ModeRS485, i, []int{2}
		if i%2 == 1 {
			s.Groups = []int{1, 2}
		}
		boardtest.PresetLink(t, dir, s)
		node, err := line.Attach(simline.NodeOptions{Name: "board"})
		if err != nil {
			t.Fatal(err)
		}
		boards = append(boards, startBoard(t, dir, node, nil))
	}
	master, err := line.Attach(simline.NodeOptions{Name: "master"})
	if err != nil {
		t.Fatal(err)
	}
	return line, master, boards
}

func TestRS485Addressing(t *testing.T) {
	_, master, boards := rs485Line(t, 3, simline.Faults{})
	h := newHost(t, master)
	// Each board answers its own address, with its address on the reply.
	for i := 1; i <= 3; i++ {
		rep, _, ok := h.line("@" + string(rune('0'+i)) + " GET /leds")
		if !ok || rep.Status != 200 || rep.Addr.String() != "@"+string(rune('0'+i)) {
			t.Fatalf("board %d: %+v ok=%v", i, rep, ok)
		}
		f, hd, _, ok := h.native(frame.Address(i), &frame.PingRequest{})
		if !ok || hd.Status != frame.StatusOK || f.Addr != frame.Address(i) {
			t.Fatalf("native ping board %d: %v %v", i, f, ok)
		}
	}
	// No address on RS485: ignored and counted, no reply.
	if _, err := master.Write([]byte("GET /leds\n")); err != nil {
		t.Fatal(err)
	}
	h.barrier(1, 2, 3)
	// A group command reaches its members without any reply.
	if _, err := master.Write([]byte(`@g1 PATCH /leds {"mode":"solid","colour":"green"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	h.barrier(1, 2, 3)
	wire, _ := frame.AppendRequest(nil, frame.GroupAddress(2), 5, &frame.BacklightRequest{Percent: 10})
	if _, err := master.Write(wire); err != nil {
		t.Fatal(err)
	}
	h.barrier(1, 2, 3)
	for i, b := range boards {
		st := assembleLEDs(b)
		want := "off"
		if (i+1)%2 == 1 {
			want = "solid"
		}
		if st != want {
			t.Errorf("board %d leds %s, want %s", i+1, st, want)
		}
	}
	rep, _, _ := h.line("@2 GET /link")
	var st link.State
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Counters.Ignored < 1 || st.Running.Mode != "rs485" {
		t.Fatalf("counters %+v", st.Counters)
	}
	// Broadcast native: every board runs it, none answers.
	wire, _ = frame.AppendRequest(nil, frame.Broadcast, 6, &frame.LEDsRequest{Mode: frame.LEDRainbow})
	if _, err := master.Write(wire); err != nil {
		t.Fatal(err)
	}
	h.barrier(1, 2, 3)
	for i, b := range boards {
		if m := assembleLEDs(b); m != "rainbow" {
			t.Errorf("board %d after broadcast: %s", i+1, m)
		}
	}
}

func assembleLEDs(b *testBoard) string {
	rep := linkGet(b, "/leds")
	var s struct{ Mode string }
	_ = json.Unmarshal(rep, &s)
	return s.Mode
}

// linkGet reads a resource through the board's HTTP handler table.
func linkGet(b *testBoard, path string) []byte {
	r, _ := b.Board.Current().HTTP.Lookup("GET", path)
	rec := newRec()
	req := newReq(path)
	r.Handler.ServeHTTP(rec, req)
	return rec.body.Bytes()
}

func TestRS485EventsKeptAndFetched(t *testing.T) {
	_, master, boards := rs485Line(t, 2, simline.Faults{})
	h := newHost(t, master)
	if _, hd, _, ok := h.native(2, &frame.EventsSetRequest{Kinds: frame.MaskClipEnded, Push: true}); !ok || hd.Status != 0 {
		t.Fatal("events set")
	}
	for i := range 7 {
		boards[1].Board.Current().Hub.Emit(events.KindClipEnded, map[string]any{"path": "/c.mov", "finished": i%2 == 0})
	}
	// push means nothing on RS485: the board keeps them (nothing but the
	// replies comes on the wire), pending says so once the link has them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		hd, _ := h.only(2, &frame.PingRequest{})
		if hd.Pending == 7 {
			break
		}
		if hd.Pending > 7 || time.Now().After(deadline) {
			t.Fatalf("pending %d, want 7", hd.Pending)
		}
		time.Sleep(time.Millisecond)
	}
	var got []frame.Record
	for len(got) < 7 {
		_, hd, body, ok := h.native(2, &frame.EventsGetRequest{})
		if !ok || hd.Status != 0 {
			t.Fatal("events get")
		}
		recs := body.(*frame.EventsGetReply).Records
		if len(recs) == 0 {
			break
		}
		got = append(got, recs...)
	}
	if len(got) != 7 || got[0].Seq != 1 || !got[0].Finished || got[1].Finished {
		t.Fatalf("records %+v", got)
	}
	if hd, _ := h.only(2, &frame.PingRequest{}); hd.Pending != 0 {
		t.Fatalf("pending after fetching: %d", hd.Pending)
	}
}

// TestRS485FaultsNeverRunCorruptCommands sends LED colours as native
// frames over a line with 1% bit flips and 1% dropped bytes, and checks
// that every colour a board ever showed is one the master sent, that many
// got through, and the counters saw faults (make test sends 80, make
// soak 300). (JSON lines carry no checksum, so a flipped bit in
// a value can pass as another value; hosts on noisy lines use native
// frames, and docs/spec-decisions.md says so.)
func TestRS485FaultsNeverRunCorruptCommands(t *testing.T) {
	line, master, boards := rs485Line(t, 2, simline.Faults{FlipRate: 0.01, DropRate: 0.01})
	h := newHost(t, master)
	h.lossy = true
	h.wait = 150 * time.Millisecond
	sent := map[string]bool{"#ffffff": true}
	var mu sync.Mutex
	var shown []string
	last := make([]string, len(boards)) // the last colour each board showed
	for i, b := range boards {
		sub := b.Board.Current().Hub.Subscribe(events.FilterOf("leds"), nil)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			for {
				m, err := sub.Next(ctx)
				if err != nil {
					return
				}
				var ev struct{ State struct{ Colour string } }
				_ = json.Unmarshal(m.Data, &ev)
				mu.Lock()
				shown = append(shown, ev.State.Colour)
				last[i] = ev.State.Colour
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := testlevel.Pick(80, 300)
	ok := 0
	for i := range n {
		r, g, b := uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))
		col := strings.ToLower(frameColour(r, g, b))
		sent[col] = true
		addr := frame.Address(1 + i%2)
		if _, hd, _, got := h.native(addr, &frame.LEDsRequest{Mode: frame.LEDSolid, R: r, G: g, B: b, Flags: frame.LEDNewColour}); got && hd.Status == 0 {
			ok++
		}
	}
	// Every change of colour so far has reached the subscriptions once
	// each board's last event shows its current colour.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < len(boards); {
		var cur struct{ Colour string }
		_ = json.Unmarshal(linkGet(boards[i], "/leds"), &cur)
		mu.Lock()
		seen := last[i]
		mu.Unlock()
		if strings.EqualFold(seen, cur.Colour) || seen == "" && cur.Colour == "#ffffff" {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("board %d shows %s, its last event %s", i+1, cur.Colour, seen)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	ran := map[string]bool{}
	for _, c := range shown {
		if !sent[c] {
			t.Fatalf("a board showed %s, which the master never sent", c)
		}
		ran[c] = true
	}
	// How many got through does not depend on how fast replies come back
	// (a loaded machine answers some after the master stopped waiting).
	if len(ran) < n/3 {
		t.Fatalf("only %d of %d commands ran over a 1%% fault line", len(ran), n)
	}
	st := line.Stats()
	if st.BitFlips == 0 || st.Dropped == 0 {
		t.Fatalf("no faults injected: %+v", st)
	}
	var counters link.Counters
	for _, b := range boards {
		c := linkCounters(b)
		counters.BadCRC += c.BadCRC
		counters.Garbage += c.Garbage
		counters.BadFrames += c.BadFrames
	}
	if counters.BadCRC+counters.Garbage+counters.BadFrames == 0 {
		t.Fatalf("boards counted no bad input: %+v", counters)
	}
	t.Logf("%d/%d ran, %d acknowledged in time; line %+v; boards bad_crc=%d garbage=%d bad_frames=%d",
		len(ran), n, ok, st, counters.BadCRC, counters.Garbage, counters.BadFrames)
}

func frameColour(r, g, b uint8) string {
	const hex = "0123456789abcdef"
	return string([]byte{'#', hex[r>>4], hex[r&15], hex[g>>4], hex[g&15], hex[b>>4], hex[b&15]})
}

func linkCounters(b *testBoard) link.Counters {
	var st link.State
	_ = json.Unmarshal(linkGet(b, "/link"), &st)
	return st.Counters
}

func TestI2C(t *testing.T) {
	bus := i2creg.NewBus()
	dir := t.TempDir()
	s := link.DefaultSettings()
	s.Mode, s.Address, s.GeneralCall = link.ModeI2C, 0x42, true
	boardtest.PresetLink(t, dir, s)
	tb := startBoard(t, dir, nil, bus)
	ctx := context.Background()
	read := func(reg i2creg.Register, n int) []byte {
		b, err := bus.Read(ctx, 0x42, reg, n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var ver i2creg.Version
	if err := ver.UnmarshalBinary(read(i2creg.RegVersion, 32)); err != nil || ver == "" {
		t.Fatalf("version %q %v", ver, err)
	}
	var st i2creg.StatusReg
	if err := st.UnmarshalBinary(read(i2creg.RegStatus, 14)); err != nil || st.Protocol != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	run := func(seq uint8, req frame.Request) i2creg.Result {
		cmd, err := i2creg.AppendCommand(nil, seq, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := bus.Write(ctx, 0x42, i2creg.RegCommand, cmd); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var res i2creg.Result
			if err := res.UnmarshalBinary(read(i2creg.RegResult, 56)); err != nil {
				t.Fatal(err)
			}
			if res.Status != frame.StatusWorking && res.Seq == seq {
				return res
			}
			if time.Now().After(deadline) {
				t.Fatal("result never ready")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if res := run(1, &frame.LEDsRequest{Mode: frame.LEDWipe, R: 9, Flags: frame.LEDNewColour}); res.Status != frame.StatusOK {
		t.Fatalf("leds: %+v", res)
	}
	if m := assembleLEDs(tb); m != "wipe" {
		t.Fatalf("leds after I2C command: %s", m)
	}
	if res := run(2, &frame.HoloRequest{Motion: frame.MotionNod}); res.Status != frame.StatusNotReady {
		t.Fatalf("holo: %+v", res)
	}
	// A corrupted command never runs.
	cmd, _ := i2creg.AppendCommand(nil, 3, &frame.LEDsRequest{Mode: frame.LEDOff})
	cmd[3] ^= 0x01
	_ = bus.Write(ctx, 0x42, i2creg.RegCommand, cmd)
	// Refused as it is written: RESULT says so, and nothing started.
	var bad i2creg.Result
	if err := bad.UnmarshalBinary(read(i2creg.RegResult, 56)); err != nil || bad.Status != frame.StatusBadRequest {
		t.Fatalf("result of a corrupted command %+v %v", bad, err)
	}
	if m := assembleLEDs(tb); m != "wipe" {
		t.Fatalf("corrupted command ran: leds %s", m)
	}
	// Events: kept and read one by one from EVENT.
	run(4, &frame.EventsSetRequest{Kinds: frame.MaskTouch})
	tb.Board.Current().Hub.Emit("touch", map[string]any{"action": "down", "x": 3, "y": 4})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := st.UnmarshalBinary(read(i2creg.RegStatus, 14)); err != nil || st.Pending > 1 || st.Pending == 0 && time.Now().After(deadline) {
			t.Fatalf("pending %+v %v", st, err)
		}
		if st.Pending == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var rec frame.Record
	if err := rec.UnmarshalBinary(read(i2creg.RegEvent, 8)); err != nil || rec.Kind != frame.KindTouch || rec.X != 3 {
		t.Fatalf("event %+v %v", rec, err)
	}
	if err := rec.UnmarshalBinary(read(i2creg.RegEvent, 8)); err != nil || rec.Kind != frame.KindNone {
		t.Fatalf("second event %+v", rec)
	}
	// General call reaches the board.
	gc, _ := i2creg.AppendCommand(nil, 5, &frame.LEDsRequest{Mode: frame.LEDOff})
	if err := bus.Write(ctx, i2creg.GeneralCall, i2creg.RegCommand, gc); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for assembleLEDs(tb) != "off" {
		if time.Now().After(deadline) {
			t.Fatal("general call did not reach the board")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = linktest.Lines
}
