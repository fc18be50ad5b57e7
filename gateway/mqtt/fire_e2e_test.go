package mqtt_test

import (
	"strings"
	"testing"
	"time"
)

// TestTimedCommands: a set command and a group command with a time
// change the boards at that moment, not when they arrive; a time on a
// command that takes none is refused on bridge/event.
func TestTimedCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	t.Parallel()
	url := brokerCases()[0].start(t)
	r := startRig(t, url, rigOptions{})
	rc := newRecorder(t, url, r.base+"/#")
	names := r.waitOnline(t)
	b, long := r.base, 20*time.Second
	for _, in := range r.infos { // a group command needs the groups known
		waitUntil(t, long, "the groups of "+in.ID, func() bool {
			v, err := r.fleet.Board(in.ID)
			return err == nil && len(v.Groups) == len(in.Groups)
		})
	}

	sent := time.Now()
	publish(t, url, b+"/"+names[0]+"/set/leds", `{"mode":"solid","colour":"#112233","lead_ms":400}`)
	rc.waitLast(long, b+"/"+names[0]+"/leds", func(v map[string]any) bool { return v["colour"] == "#112233" })
	if d := time.Since(sent); d < 400*time.Millisecond {
		t.Errorf("a command with lead_ms 400 changed the board after %v", d)
	}

	sent = time.Now()
	at := sent.Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	publish(t, url, b+"/group/1/set/leds", `{"fire_at":"`+at+`","colour":"#445566","loop":true}`)
	for i, in := range r.infos {
		if in.Groups[0] != 1 {
			continue
		}
		rc.waitLast(long, b+"/"+names[i]+"/leds", func(v map[string]any) bool { return v["colour"] == "#445566" })
	}
	if d := time.Since(sent); d < 500*time.Millisecond {
		t.Errorf("a group command with fire_at 500 ms ahead changed the boards after %v", d)
	}

	publish(t, url, b+"/"+names[0]+"/set/settings", `{"lead_ms":100}`)
	rc.wait(long, "refusal", func(m rec) bool {
		return m.Topic == b+"/bridge/event" && strings.Contains(string(m.Payload), "settings takes no fire_at")
	})
}
