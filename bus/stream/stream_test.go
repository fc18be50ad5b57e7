package stream

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/cobs"
	"github.com/holofleet/holofleet/bus/crc16"
)

func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// wire wraps a frame body (addr..payload) as it travels: a CRC, COBS and
// zero bytes on both sides.
func wire(body []byte) []byte {
	out := []byte{0}
	out = cobs.Append(out, crc16.Append(bytes.Clone(body)))
	return append(out, 0)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func s(str string) []byte { return []byte(str) }

func fr(hexBody string) Item  { return Item{Frame, h(hexBody)} }
func ln(line string) Item     { return Item{Line, []byte(line)} }
func long(prefix string) Item { return Item{TooLong, []byte(prefix)} }

// drain takes every item complete now, copying the data.
func drain(t testing.TB, r *Receiver) []Item {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out []Item
	for {
		it, err := r.Next(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Next: %v", err)
			}
			return out
		}
		out = append(out, Item{it.Kind, bytes.Clone(it.Data)})
	}
}

var cmpItems = cmp.Comparer(func(a, b Item) bool { return a.Kind == b.Kind && bytes.Equal(a.Data, b.Data) })

var (
	ping    = h("05 07 01")               // board 5, seq 7, PING
	colour  = h("01 02 21 ff 00 80")      // COLOUR with a zero byte inside
	events  = h("00 09 51 00 00")         // EVENTS_GET to every board: zeros
	maxBody = bytes.Repeat([]byte{1}, 51) // header and a 48-byte payload
)

var line1024 = "PATCH /leds " + strings.Repeat("x", 1024-len("PATCH /leds "))

type streamCase struct {
	name  string
	mode  Mode
	in    []byte
	want  []Item
	stats Stats // Bytes is filled in from in
}

var cases = []streamCase{
	{name: "line", in: s("GET /info\n"), want: []Item{ln("GET /info")},
		stats: Stats{Lines: 1}},
	{name: "crlf and empty lines", in: s("\n\r\n@5 #a GET /leds\r\n\n"), want: []Item{ln("@5 #a GET /leds")},
		stats: Stats{Lines: 1}},
	{name: "frame", in: wire(ping), want: []Item{fr("05 07 01")},
		stats: Stats{Frames: 1}},
	{name: "frame with zeros", in: cat(wire(colour), wire(events)), want: []Item{fr("01 02 21 ff 00 80"), fr("00 09 51 00 00")},
		stats: Stats{Frames: 2}},
	{name: "largest frame", in: wire(maxBody), want: []Item{{Frame, maxBody}},
		stats: Stats{Frames: 1}},
	{name: "mixed", in: cat(s("! {\"event\":\"touch\"}\n"), wire(ping), s("#t 200 +1 {}\n"), wire(colour), s("@g2 POST /scenes/end\n")),
		want:  []Item{ln(`! {"event":"touch"}`), fr("05 07 01"), ln("#t 200 +1 {}"), fr("01 02 21 ff 00 80"), ln("@g2 POST /scenes/end")},
		stats: Stats{Frames: 2, Lines: 3}},
	{name: "line right after a frame", in: cat(wire(ping), s("GET /x\n")), want: []Item{fr("05 07 01"), ln("GET /x")},
		stats: Stats{Frames: 1, Lines: 1}},
	{name: "zeros in a row", in: cat(h("00 00 00"), wire(ping), h("00 00")), want: []Item{fr("05 07 01")},
		stats: Stats{Frames: 1}},
	{name: "garbage between", in: cat(s("xyz"), wire(ping), s("~~ noise\n"), h("ff fe"), s("\nGET /a\n")),
		want:  []Item{fr("05 07 01"), ln("GET /a")},
		stats: Stats{Frames: 1, Lines: 1, GarbageBytes: 3 + 8 + 2, GarbageSkips: 3}},
	{name: "garbage up to a zero", in: cat(s("junk"), wire(ping)), want: []Item{fr("05 07 01")},
		stats: Stats{Frames: 1, GarbageBytes: 4, GarbageSkips: 1}},
	{name: "bad crc", in: cat(func() []byte { w := wire(ping); w[2] ^= 0x40; return w }(), wire(ping)), want: []Item{fr("05 07 01")},
		stats: Stats{Frames: 1, BadCRC: 1}},
	{name: "bad cobs", in: cat(h("00 05 11 22 00"), wire(ping)), want: []Item{fr("05 07 01")},
		stats: Stats{Frames: 1, BadCOBS: 1}},
	{name: "short frame", in: cat(wire(h("05 07")), wire(ping)), want: []Item{fr("05 07 01")},
		stats: Stats{Frames: 1, BadLength: 1}},
	{name: "long frame", in: cat(wire(bytes.Repeat([]byte{2}, 60)), wire(ping)), want: []Item{fr("05 07 01")},
		// 55 bytes kept, one skipped, then 7 more skipped up to the zero
		stats: Stats{Frames: 1, BadLength: 1, GarbageBytes: 63, GarbageSkips: 1}},
	{name: "zero abandons a line", in: cat(s("GET /in"), wire(ping), s("GET /x\n")), want: []Item{fr("05 07 01"), ln("GET /x")},
		stats: Stats{Frames: 1, Lines: 1, GarbageBytes: 7, GarbageSkips: 1}},
	{name: "line feed inside a frame is data", in: wire(h("0a 0a 0a")), want: []Item{fr("0a 0a 0a")},
		stats: Stats{Frames: 1}},
	{name: "longest line", in: s(line1024[:1023] + "\n"), want: []Item{ln(line1024[:1023])},
		stats: Stats{Lines: 1}},
	{name: "longest line with cr", in: s(line1024[:1022] + "\r\n"), want: []Item{ln(line1024[:1022])},
		stats: Stats{Lines: 1}},
	{name: "too long", in: s(line1024 + "\nGET /a\n"), want: []Item{long(line1024[:1023]), ln("GET /a")},
		stats: Stats{Lines: 1, TooLong: 1}},
	{name: "much too long", in: s("@3 #t " + strings.Repeat("y", 3000) + "\r\n"), want: []Item{long(("@3 #t " + strings.Repeat("y", 3000))[:1023])},
		stats: Stats{TooLong: 1}},
	{name: "frames only", mode: FramesOnly, in: cat(s("GET /x\n"), h("00"), cobs.Encode(crc16.Append(bytes.Clone(ping))), h("00"), cobs.Encode(crc16.Append(h("0a 00 0a"))), h("00")),
		want:  []Item{fr("05 07 01"), fr("0a 00 0a")},
		stats: Stats{Frames: 2, GarbageBytes: 7, GarbageSkips: 1}},
	{name: "lines only", mode: LinesOnly, in: cat(wire(ping), s("\nGET /x\n")), want: []Item{ln("GET /x")},
		stats: Stats{Lines: 1, GarbageBytes: 8, GarbageSkips: 1}},
}

func (c streamCase) wantStats() Stats {
	st := c.stats
	st.Bytes = uint64(len(c.in))
	return st
}

func check(t *testing.T, r *Receiver, c streamCase, got []Item) {
	t.Helper()
	if diff := cmp.Diff(got, c.want, cmpItems); diff != "" {
		t.Errorf("items (-got +want)\n%s", diff)
	}
	if diff := cmp.Diff(r.Stats(), c.wantStats()); diff != "" {
		t.Errorf("stats (-got +want)\n%s", diff)
	}
}

func TestReceiver(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := New(Config{Mode: c.mode, BufferSize: 4096})
			if _, err := r.Write(c.in); err != nil {
				t.Fatal(err)
			}
			check(t, r, c, drain(t, r))
		})
	}
}

// Items do not depend on how the bytes are cut into writes.
func TestReceiverSplitWrites(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range len(c.in) + 1 {
				r := New(Config{Mode: c.mode, BufferSize: 4096})
				r.Write(c.in[:i])
				got := drain(t, r)
				r.Write(c.in[i:])
				got = append(got, drain(t, r)...)
				if diff := cmp.Diff(got, c.want, cmpItems); diff != "" {
					t.Fatalf("split at %d: items (-got +want)\n%s", i, diff)
				}
				if diff := cmp.Diff(r.Stats(), c.wantStats()); diff != "" {
					t.Fatalf("split at %d: stats (-got +want)\n%s", i, diff)
				}
			}
			// and one byte at a time
			r := New(Config{Mode: c.mode, BufferSize: 4096})
			var got []Item
			for i := range c.in {
				r.Write(c.in[i : i+1])
				got = append(got, drain(t, r)...)
			}
			check(t, r, c, got)
		})
	}
}

// A writer faster than the reader never blocks: what does not fit in the
// 2 KB buffer is dropped and counted, the cut item is thrown away, and the
// receiver starts again at the next delimiter after the gap.
func TestOverrun(t *testing.T) {
	r := New(Config{})
	line := s("PATCH /leds {\"brightness\":20,\"pad\":\"" + strings.Repeat("p", 61) + "\"}\n") // 100 bytes
	if len(line) != 100 {
		t.Fatalf("line is %d bytes", len(line))
	}
	for range 30 {
		if n, err := r.Write(line); n != 100 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := r.Buffered(); got != DefaultBufferSize {
		t.Fatalf("Buffered = %d, want %d", got, DefaultBufferSize)
	}
	st := r.Stats()
	if st.Overruns != 1 || st.OverrunBytes != 3000-2048 {
		t.Fatalf("overruns %d, bytes %d; want 1, %d", st.Overruns, st.OverrunBytes, 3000-2048)
	}
	got := drain(t, r)
	if len(got) != 20 {
		t.Fatalf("got %d lines, want the 20 that fit", len(got))
	}
	// The line after the gap is lost with the cut one (its line feed is the
	// first delimiter after the gap); the one after that arrives.
	r.Write(s("GET /lost\n"))
	r.Write(s("GET /kept\n"))
	got = drain(t, r)
	if diff := cmp.Diff(got, []Item{ln("GET /kept")}, cmpItems); diff != "" {
		t.Errorf("after the gap (-got +want)\n%s", diff)
	}
	st = r.Stats()
	want := Stats{Bytes: 3020, Lines: 21, Overruns: 1, OverrunBytes: 952, GarbageBytes: 48 + 9, GarbageSkips: 1}
	if diff := cmp.Diff(st, want); diff != "" {
		t.Errorf("stats (-got +want)\n%s", diff)
	}
}

// A gap inside a frame: the frame is dropped and the next zero opens a
// frame again.
func TestOverrunFrame(t *testing.T) {
	r := New(Config{BufferSize: 16})
	r.Write(cat(h("00 00 00 00 00 00 00 00 00 00 00 00"), wire(maxBody)))
	st := r.Stats()
	if st.Overruns != 1 {
		t.Fatalf("overruns = %d", st.Overruns)
	}
	if got := drain(t, r); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
	r.Write(wire(ping))
	if diff := cmp.Diff(drain(t, r), []Item{fr("05 07 01")}, cmpItems); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
}

func TestNextWaitsAndStops(t *testing.T) {
	r := New(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan Item)
	go func() {
		defer close(got)
		it, err := r.Next(ctx)
		if err != nil {
			t.Errorf("Next: %v", err)
			return
		}
		got <- Item{it.Kind, bytes.Clone(it.Data)}
	}()
	r.Write(s("GET /"))
	r.Write(s("info\n"))
	if diff := cmp.Diff(<-got, ln("GET /info"), cmpItems); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}

	// Cancelling the context ends a wait.
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error)
	go func() { _, err := r.Next(cctx); errc <- err }()
	ccancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v", err)
	}

	// Close: complete items are still given, then ErrClosed.
	r.Write(s("GET /a\nGET /b\nGET /c"))
	r.Close()
	r.Close()
	if _, err := r.Write(s("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	var lines []string
	for {
		it, err := r.Next(ctx)
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(it.Data))
	}
	if diff := cmp.Diff(lines, []string{"GET /a", "GET /b"}); diff != "" {
		t.Errorf("after Close (-got +want)\n%s", diff)
	}
}

// mixedStream returns n items' worth of wire bytes and the items.
func mixedStream(n int) ([]byte, []Item) {
	var in []byte
	var want []Item
	for i := range n {
		switch i % 3 {
		case 0:
			body := []byte{byte(i%223 + 1), byte(i), 0x40, byte(i >> 8), 0, byte(i)}
			in = append(in, wire(body)...)
			want = append(want, Item{Frame, body})
		case 1:
			l := "@" + string(rune('1'+i%9)) + " #t" + string(rune('a'+i%26)) + " PATCH /leds {\"brightness\":" + string(rune('0'+i%10)) + "}"
			in = append(in, l+"\n"...)
			want = append(want, ln(l))
		default:
			l := "! {\"event\":\"touch\",\"action\":\"down\",\"x\":1,\"y\":2}"
			in = append(in, l+"\r\n"...)
			want = append(want, ln(l))
		}
	}
	return in, want
}

// One goroutine writes in odd-sized pieces while another reads; with the
// writer pacing itself on Buffered nothing is lost. Run with -race.
func TestConcurrentWriteNext(t *testing.T) {
	in, want := mixedStream(3000)
	r := New(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, step := 0, 1; i < len(in); step = step%97 + 1 {
			end := min(i+step, len(in))
			for r.Buffered()+(end-i) > DefaultBufferSize {
				if ctx.Err() != nil {
					return
				}
				runtime.Gosched()
			}
			r.Write(in[i:end])
			i = end
		}
	}()
	var got []Item
	for len(got) < len(want) {
		it, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d items: %v", len(got), err)
		}
		got = append(got, Item{it.Kind, bytes.Clone(it.Data)})
		_ = r.Stats()
	}
	wg.Wait()
	if diff := cmp.Diff(got, want, cmpItems); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	if st := r.Stats(); st.Overruns != 0 || st.GarbageBytes != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A writer with no pacing against a reader: Write returns at once, and
// whatever arrives is intact and in order.
func TestConcurrentOverrun(t *testing.T) {
	in, want := mixedStream(3000)
	r := New(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer r.Close()
		for i := 0; i < len(in); i += 61 {
			r.Write(in[i:min(i+61, len(in))])
		}
	}()
	j := 0
	for {
		it, err := r.Next(ctx)
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for j < len(want) && !cmp.Equal(Item{it.Kind, it.Data}, want[j], cmpItems) {
			j++
		}
		if j == len(want) {
			t.Fatalf("item %v %q is not among the items sent, in order", it.Kind, it.Data)
		}
		j++
	}
	wg.Wait()
	st := r.Stats()
	if st.Bytes != uint64(len(in)) || st.Frames+st.Lines > uint64(len(want)) {
		t.Errorf("stats %+v", st)
	}
	t.Logf("%d of %d items through, %d overruns (%d bytes)", st.Frames+st.Lines, len(want), st.Overruns, st.OverrunBytes)
}

type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.n, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func TestPump(t *testing.T) {
	in := cat(wire(ping), s("GET /info\n"))
	r := New(Config{})
	if err := r.Pump(context.Background(), &chunkReader{in, 3}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(drain(t, r), []Item{fr("05 07 01"), ln("GET /info")}, cmpItems); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Pump(ctx, &chunkReader{in, 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("Pump with a done context: %v", err)
	}
	r.Close()
	if err := r.Pump(context.Background(), &chunkReader{in, 3}); !errors.Is(err, ErrClosed) {
		t.Errorf("Pump after Close: %v", err)
	}
}

func FuzzReceiver(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in, uint8(c.mode), uint8(7), uint16(0))
	}
	f.Add(cat(s("x\x00\x05\x11\x00GET /\n"), wire(colour)), uint8(0), uint8(1), uint16(16))
	f.Fuzz(func(t *testing.T, in []byte, mode, chunk uint8, size uint16) {
		r := New(Config{Mode: Mode(mode % 3), BufferSize: int(size % 4096)})
		step := int(chunk) + 1
		check := func(items []Item) {
			for _, it := range items {
				switch it.Kind {
				case Frame:
					// The CRC was checked and cut off; it is still behind Data.
					full := it.Data[:len(it.Data)+2]
					if !crc16.Valid(full) || len(full) < MinFrame || len(full) > DefaultMaxFrame {
						t.Fatalf("frame % x with a bad CRC or length", full)
					}
				case Line:
					if len(it.Data) >= DefaultMaxLine || bytes.IndexByte(it.Data, '\n') >= 0 || !lineStart(it.Data[0]) {
						t.Fatalf("bad line %q", it.Data)
					}
				case TooLong:
					if len(it.Data) != DefaultMaxLine-1 {
						t.Fatalf("too-long prefix of %d bytes", len(it.Data))
					}
				default:
					t.Fatalf("item of kind %v", it.Kind)
				}
			}
		}
		for i := 0; i < len(in); i += step {
			r.Write(in[i:min(i+step, len(in))])
			if chunk%2 == 0 {
				check(drainFrames(t, r))
			}
		}
		r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var items []Item
		for {
			it, err := r.Next(ctx)
			if errors.Is(err, ErrClosed) {
				break
			}
			if err != nil {
				t.Fatalf("Next blocked: %v", err)
			}
			items = append(items, it)
			check(items[len(items)-1:])
		}
		st := r.Stats()
		if st.Bytes != uint64(len(in)) {
			t.Fatalf("Bytes = %d, want %d", st.Bytes, len(in))
		}
	})
}

// drainFrames is drain without copying, so that the CRC behind a frame's
// Data can be checked; each item is checked before the next Next.
func drainFrames(t *testing.T, r *Receiver) []Item {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out []Item
	for {
		it, err := r.Next(ctx)
		if err != nil {
			return out
		}
		if it.Kind == Frame {
			full := it.Data[:len(it.Data)+2]
			if !crc16.Valid(full) {
				t.Fatalf("frame % x with a bad CRC", full)
			}
			it.Data = bytes.Clone(full)[:len(it.Data)]
		} else {
			it.Data = bytes.Clone(it.Data)
		}
		out = append(out, it)
	}
}

func BenchmarkReceiver(b *testing.B) {
	in, want := mixedStream(30)
	r := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r.Write(in)
		for range want {
			if _, err := r.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if st := r.Stats(); st.Overruns != 0 || st.GarbageBytes != 0 {
		b.Fatalf("stats %+v", st)
	}
}
