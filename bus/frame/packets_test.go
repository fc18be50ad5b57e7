package frame

import (
	"encoding/hex"
	"strings"
)

// hx turns a commented hex listing into bytes: everything after // on a
// line is a comment, whitespace is ignored.
func hx(s string) []byte {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		panic(err)
	}
	return out
}

// packet is one frame of the host link written out byte by byte, with
// the typed message it carries. Requests (and EVENT frames) set req;
// replies set hdr and body (body nil when the status is not ok).
type packet struct {
	name string
	raw  []byte // the frame before COBS, checksum included
	req  Message
	hdr  Header
	body Message
}

// packets is the shared table of native frames: one request and one
// reply for every message type, plus addressing, error replies and every
// event record kind. Checksums are CRC-16/CCITT-FALSE, little-endian.
var packets = []packet{
	// Requests, all to board 5.
	{name: "PING request", req: &PingRequest{}, raw: hx(`
		05          // addr: board 5
		01          // seq 1
		01          // type PING
		7C 04       // crc16
	`)},
	{name: "VERSION request", req: &VersionRequest{}, raw: hx(`
		05 02 02    // board 5, seq 2, VERSION
		4C 61       // crc16
	`)},
	{name: "STATUS request", req: &StatusRequest{}, raw: hx(`
		05 03 03    // board 5, seq 3, STATUS
		5C 42       // crc16
	`)},
	{name: "SCENE request", req: &SceneRequest{Slot: 7}, raw: hx(`
		05 04 10    // board 5, seq 4, SCENE
		07          // slot 7
		D1 97       // crc16
	`)},
	{name: "END request", req: &EndRequest{}, raw: hx(`
		05 05 11    // board 5, seq 5, END
		89 DA       // crc16
	`)},
	{name: "SCREEN_OFF request", req: &ScreenOffRequest{}, raw: hx(`
		05 06 20    // board 5, seq 6, SCREEN_OFF
		A8 A9       // crc16
	`)},
	{name: "COLOUR request", req: &ColourRequest{R: 0xFF, G: 0x80, B: 0x00}, raw: hx(`
		05 07 21    // board 5, seq 7, COLOUR
		FF 80 00    // r 255, g 128, b 0
		C4 BF       // crc16
	`)},
	{name: "BACKLIGHT request", req: &BacklightRequest{Percent: 75}, raw: hx(`
		05 08 22    // board 5, seq 8, BACKLIGHT
		4B          // percent 75
		0F 08       // crc16
	`)},
	{name: "LEDS request", req: &LEDsRequest{Mode: LEDWipe, R: 10, G: 20, B: 30, Brightness: 30, Flags: LEDLoop | LEDNewColour}, raw: hx(`
		05 09 30    // board 5, seq 9, LEDS
		02          // mode wipe
		0A 14 1E    // r 10, g 20, b 30
		1E          // brightness 30
		03          // flags: loop, new colour
		FF 3B       // crc16
	`)},
	{name: "LEDS request keeping mode and colour", req: &LEDsRequest{Mode: LEDKeep, Brightness: 0}, raw: hx(`
		05 09 30    // board 5, seq 9, LEDS
		FF          // mode: leave as is
		00 00 00    // colour, ignored without the new-colour flag
		00          // brightness: leave as is
		00          // flags: none
		85 3B       // crc16
	`)},
	{name: "HOLO move request", req: &HoloRequest{Motion: MotionMove, X: -50, Y: 100, DurationMS: 1500}, raw: hx(`
		05 0A 40    // board 5, seq 10, HOLO
		01          // motion move
		CE          // x -50
		64          // y 100
		DC 05       // duration_ms 1500
		00          // range: default
		00          // count: default
		E8 20       // crc16
	`)},
	{name: "HOLO nudge request", req: &HoloRequest{Motion: MotionNudge, X: -128, Y: 127, Range: 20, Count: 3}, raw: hx(`
		05 0B 40    // board 5, seq 11, HOLO
		02          // motion nudge
		80          // x -128
		7F          // y 127
		00 00       // duration_ms: default
		14          // range 20
		03          // count 3
		4A E2       // crc16
	`)},
	{name: "EVENTS_SET request", req: &EventsSetRequest{Kinds: MaskClipEnded | MaskSceneEnded | MaskTouch, Push: true}, raw: hx(`
		05 0C 50    // board 5, seq 12, EVENTS_SET
		07          // kinds: clip_ended, scene_ended, touch
		01          // push
		11 AA       // crc16
	`)},
	{name: "EVENTS_GET request", req: &EventsGetRequest{After: 0x1234}, raw: hx(`
		05 0D 51    // board 5, seq 13, EVENTS_GET
		34 12       // after 4660
		01 99       // crc16
	`)},
	{name: "RESTART request", req: &RestartRequest{}, raw: hx(`
		05 0E 7F    // board 5, seq 14, RESTART
		1B 8B       // crc16
	`)},
	{name: "SCENE request to group 3", req: &SceneRequest{Slot: 1}, raw: hx(`
		E2 0F 10    // addr 226: group 3; seq 15, SCENE
		01          // slot 1
		21 D2       // crc16
	`)},
	{name: "SCENE request to group 3 with a clip start", req: &SceneRequest{Slot: 1, ClipStartUS: 1795000000123456}, raw: hx(`
		E2 11 10    // addr 226: group 3; seq 17, SCENE
		01          // slot 1
		40 12 61 01 8B 60 06 00 // clip_start 1795000000123456 µs (extension clip-sync)
		D8 8A       // crc16
	`)},
	{name: "SCREEN_OFF request to every board", req: &ScreenOffRequest{}, raw: hx(`
		00 10 20    // addr 0: broadcast; seq 16, SCREEN_OFF
		8D EB       // crc16
	`)},

	// EVENT frames pushed by board 5, one per record kind.
	{name: "EVENT clip_ended", req: &Record{Kind: KindClipEnded, Seq: 41, Finished: true}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		01          // kind clip_ended
		29 00       // seq 41
		01          // finished
		00 00 00 00 // unused
		62 5E       // crc16
	`)},
	{name: "EVENT scene_ended", req: &Record{Kind: KindSceneEnded, Seq: 0x1235, Slot: 7, Then: ThenRestore, By: ByTime}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		02          // kind scene_ended
		35 12       // seq 4661
		07          // slot 7
		01          // then restore
		01          // by time
		00 00       // unused
		C2 EE       // crc16
	`)},
	{name: "EVENT touch", req: &Record{Kind: KindTouch, Seq: 0x1236, Action: TouchUp, X: 120, Y: 239}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		03          // kind touch
		36 12       // seq 4662
		01          // action up
		78          // x 120
		EF          // y 239
		00 00       // unused
		24 B6       // crc16
	`)},
	{name: "EVENT clip_started", req: &Record{Kind: KindClipStarted, Seq: 42, Loop: true, Plays: 3, Frames: 60, FPS: 30}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		04          // kind clip_started
		2A 00       // seq 42
		01          // loop
		03          // plays 3
		3C 00       // frames 60
		1E          // fps 30
		B9 16       // crc16
	`)},
	{name: "EVENT scene_started", req: &Record{Kind: KindSceneStarted, Seq: 65535, Slot: 0, Then: ThenOff, UntilClipEnds: true, DurationS: 600}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		05          // kind scene_started
		FF FF       // seq 65535
		00          // slot: none
		02          // then off
		01          // until_clip_ends
		58 02       // duration_s 600
		A6 32       // crc16
	`)},
	{name: "EVENT ready", req: &Record{Kind: KindReady, Protocol: 1, Address: 5}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		0F          // kind ready
		00 00       // seq 0
		01          // protocol 1
		05          // address 5
		00 00 00    // unused
		0C 39       // crc16
	`)},
	{name: "EVENT of an unknown kind", req: &Record{Kind: 9, Seq: 7, Raw: [5]byte{1, 2, 3, 4, 5}}, raw: hx(`
		05 00 70    // board 5, seq 0, EVENT
		09          // kind 9: not in protocol 1
		07 00       // seq 7
		01 02 03 04 05 // kept as they are
		9F 34       // crc16
	`)},

	// Replies from board 5.
	{name: "PING reply", hdr: Header{}, body: &PingReply{Protocol: 1, UptimeS: 3600}, raw: hx(`
		05 01 81    // board 5, seq 1, PING reply
		00          // status ok
		00          // pending 0
		01          // protocol 1
		10 0E 00 00 // uptime_s 3600
		CF D8       // crc16
	`)},
	{name: "VERSION reply", hdr: Header{Pending: 2}, body: &VersionReply{Version: "1.4.0"}, raw: hx(`
		05 02 82    // board 5, seq 2, VERSION reply
		00 02       // ok, pending 2
		31 2E 34 2E 30 // "1.4.0"
		3D 25       // crc16
	`)},
	{name: "VERSION reply of 32 bytes", body: &VersionReply{Version: "0123456789abcdef0123456789abcdef"}, raw: hx(`
		05 02 82    // board 5, seq 2, VERSION reply
		00 00       // ok, pending 0
		30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66 // "0123456789abcdef"
		30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66 // "0123456789abcdef"
		D0 66       // crc16
	`)},
	{name: "STATUS reply", hdr: Header{Pending: 1}, body: &StatusReply{Block: StatusBlock{
		Showing: ShowingClip, Scene: 7, Remaining: 300, Holo: HoloTwitch, LEDs: LEDRainbow,
		Backlight: 80, Brightness: 30, Seq: 12345, LastStatus: StatusOK, Flags: FlagTouch | FlagHoloReady,
	}}, raw: hx(`
		05 03 83    // board 5, seq 3, STATUS reply
		00 01       // ok, pending 1
		04          // showing clip
		07          // scene slot 7
		2C 01       // remaining 30.0 s
		02          // holo twitch
		03          // leds rainbow
		50          // backlight 80
		1E          // brightness 30
		39 30       // seq 12345
		00          // last_status ok
		03          // flags: touch, holo ready
		BC 59       // crc16
	`)},
	{name: "STATUS reply when idle", body: &StatusReply{Block: StatusBlock{
		Scene: SceneNoSlot, Remaining: NoRemaining, Holo: HoloCannotMove, Brightness: 1, LastStatus: StatusNotFound,
	}}, raw: hx(`
		05 03 83    // board 5, seq 3, STATUS reply
		00 00       // ok, pending 0
		00          // showing nothing
		FF          // a scene without a slot
		FF FF       // remaining: none
		FF          // holo cannot move
		00          // leds off
		00          // backlight 0
		01          // brightness 1
		00 00       // seq: none yet
		02          // last_status not found
		00          // flags: none
		B2 CB       // crc16
	`)},
	{name: "STATUS reply busy", hdr: Header{Status: StatusBusy, Pending: 255}, raw: hx(`
		05 03 83    // board 5, seq 3, STATUS reply
		05          // status busy: no body follows
		FF          // pending 255
		88 2A       // crc16
	`)},
	{name: "SCENE reply", body: &Empty{}, raw: hx(`
		05 04 90    // board 5, seq 4, SCENE reply
		00 00       // ok, pending 0
		93 80       // crc16
	`)},
	{name: "SCENE reply not found", hdr: Header{Status: StatusNotFound}, raw: hx(`
		05 04 90    // board 5, seq 4, SCENE reply
		02 00       // not found, pending 0
		F1 E6       // crc16
	`)},
	{name: "END reply", body: &Empty{}, raw: hx(`
		05 05 91    // board 5, seq 5, END reply
		00 00       // ok, pending 0
		17 C1       // crc16
	`)},
	{name: "SCREEN_OFF reply", body: &Empty{}, raw: hx(`
		05 06 A0    // board 5, seq 6, SCREEN_OFF reply
		00 00       // ok, pending 0
		5E A8       // crc16
	`)},
	{name: "COLOUR reply", hdr: Header{Pending: 3}, body: &Empty{}, raw: hx(`
		05 07 A1    // board 5, seq 7, COLOUR reply
		00 03       // ok, pending 3
		B9 D9       // crc16
	`)},
	{name: "BACKLIGHT reply bad request", hdr: Header{Status: StatusBadRequest}, raw: hx(`
		05 08 A2    // board 5, seq 8, BACKLIGHT reply
		01 00       // bad request, pending 0
		55 57       // crc16
	`)},
	{name: "LEDS reply", body: &Empty{}, raw: hx(`
		05 09 B0    // board 5, seq 9, LEDS reply
		00 00       // ok, pending 0
		D3 3F       // crc16
	`)},
	{name: "HOLO reply not ready", hdr: Header{Status: StatusNotReady}, raw: hx(`
		05 0A C0    // board 5, seq 10, HOLO reply
		04 00       // not ready, pending 0
		C3 B0       // crc16
	`)},
	{name: "SCENE reply not playable", hdr: Header{Status: StatusNotPlayable}, raw: hx(`
		05 04 90    // board 5, seq 4, SCENE reply
		03 00       // not playable, pending 0
		C0 D5       // crc16
	`)},
	{name: "RESTART reply failed", hdr: Header{Status: StatusFailed}, raw: hx(`
		05 0E FF    // board 5, seq 14, RESTART reply
		06 00       // failed, pending 0
		C4 F5       // crc16
	`)},
	{name: "EVENTS_SET reply", body: &EventsSetReply{Seq: 0x1234}, raw: hx(`
		05 0C D0    // board 5, seq 12, EVENTS_SET reply
		00 00       // ok, pending 0
		34 12       // seq 4660
		4A 4F       // crc16
	`)},
	{name: "EVENTS_GET reply, none", body: &EventsGetReply{}, raw: hx(`
		05 0D D1    // board 5, seq 13, EVENTS_GET reply
		00 00       // ok, pending 0
		00          // lost 0
		00          // count 0
		99 5B       // crc16
	`)},
	{name: "EVENTS_GET reply, five", hdr: Header{Pending: 4}, body: &EventsGetReply{Lost: 2, Records: []Record{
		{Kind: KindClipStarted, Seq: 100, Plays: 1, Frames: 36, FPS: 12},
		{Kind: KindSceneStarted, Seq: 101, Slot: 3, Then: ThenRestore, DurationS: 10},
		{Kind: KindTouch, Seq: 102, Action: TouchDown, X: 0, Y: 17},
		{Kind: KindSceneEnded, Seq: 103, Slot: 3, Then: ThenRestore, By: ByReplaced},
		{Kind: KindClipEnded, Seq: 104},
	}}, raw: hx(`
		05 0D D1                // board 5, seq 13, EVENTS_GET reply
		00 04                   // ok, pending 4: ask again
		02                      // lost 2
		05                      // count 5
		04 64 00 00 01 24 00 0C // clip_started 100: once, 36 frames, 12 fps
		05 65 00 03 01 00 0A 00 // scene_started 101: slot 3, restore, 10 s
		03 66 00 00 00 11 00 00 // touch 102: down at 0,17
		02 67 00 03 01 03 00 00 // scene_ended 103: slot 3, restore, replaced
		01 68 00 00 00 00 00 00 // clip_ended 104: not finished
		56 DD       // crc16
	`)},
	{name: "RESTART reply", body: &Empty{}, raw: hx(`
		05 0E FF    // board 5, seq 14, RESTART reply
		00 00       // ok, pending 0
		62 5F       // crc16
	`)},
	{name: "reply to an unknown type", hdr: Header{Status: StatusUnknownType}, raw: hx(`
		05 11 E3    // board 5, seq 17, reply to type 0x63
		07 00       // unknown type, pending 0
		BE 3F       // crc16
	`)},
}
