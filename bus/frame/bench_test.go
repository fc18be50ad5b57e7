package frame

import "testing"

// BenchmarkFrameEncodeDecode encodes a STATUS reply into a reused wire
// buffer and decodes it back into reused buffers, as a board and a host
// do per exchange.
func BenchmarkFrameEncodeDecode(b *testing.B) {
	reply := StatusReply{Block: StatusBlock{
		Showing: ShowingClip, Scene: 7, Remaining: 300, Holo: HoloTwitch, LEDs: LEDRainbow,
		Backlight: 80, Brightness: 30, Seq: 12345, Flags: FlagTouch | FlagHoloReady,
	}}
	payload := make([]byte, 0, MaxPayload)
	wire := make([]byte, 0, MaxWireLen)
	raw := make([]byte, 0, MaxLen)
	var got StatusReply
	b.ReportAllocs()
	for b.Loop() {
		p, _ := Header{Pending: 1}.AppendBinary(payload[:0])
		p, err := reply.AppendBinary(p)
		if err != nil {
			b.Fatal(err)
		}
		wire, err = AppendEncode(wire[:0], Frame{Addr: 5, Seq: 3, Type: TypeStatus.Reply(), Payload: p})
		if err != nil {
			b.Fatal(err)
		}
		var f Frame
		f, raw, err = Decode(raw, wire)
		if err != nil {
			b.Fatal(err)
		}
		h, body, err := SplitReply(f.Payload)
		if err != nil || h.Status != StatusOK {
			b.Fatal(h, err)
		}
		if err := got.UnmarshalBinary(body); err != nil {
			b.Fatal(err)
		}
	}
	if got != reply {
		b.Fatalf("got %+v", got)
	}
	// Our cost against the time the same frame takes on a 115200 baud
	// line (10 bits a byte): far below 1 means the codec never limits
	// the link.
	wireNs := float64(len(wire)) * 10 / 115200 * 1e9
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/wireNs, "wire-115200-ratio")
}

// BenchmarkAppendReply measures the convenience path that takes the body
// as an interface.
func BenchmarkAppendReply(b *testing.B) {
	reply := StatusReply{Block: StatusBlock{Showing: ShowingClip, Remaining: NoRemaining}}
	wire := make([]byte, 0, MaxWireLen)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		wire, err = AppendReply(wire[:0], 5, 3, TypeStatus, Header{}, reply)
		if err != nil {
			b.Fatal(err)
		}
	}
}
