package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/holofleet/holofleet/gateway/action"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
)

// The bridge's side of Home Assistant (gateway/mqtt/homeassistant decides
// what a command does and writes the discovery message): reading a
// board's state for a light command and running what it decided.

// discoveryPayload is the board's device discovery message.
func (b *Bridge) discoveryPayload(bi *boardInfo) []byte {
	return homeassistant.Discovery(b.t, homeassistant.Device{ID: bi.view.ID, Name: bi.name, Hostname: bi.view.Hostname,
		Firmware: bi.view.Firmware, Scenes: bi.scenes, Installation: b.o.InstallationStates != nil}, b.o.Version)
}

// runHALight runs an HA light command on one board.
func (b *Bridge) runHALight(ctx context.Context, id, resource string, c homeassistant.Light) error {
	if resource == "leds" {
		var now homeassistant.LEDsNow
		if c.On && c.Effect == nil {
			var st struct {
				Mode string `json:"mode"`
			}
			if err := b.readState(ctx, id, "/leds", &st); err != nil {
				return err
			}
			now = homeassistant.LEDsNow{Mode: st.Mode, LastOn: b.lastLEDMode(id)}
		}
		p := homeassistant.LEDsPatch(c, now)
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
		if p == (action.LEDs{}) {
			return nil // ON for a strip that is on: nothing to change
		}
		_, err := b.callAll(ctx, id, []apiCall{callOf(p.Request())})
		return err
	}
	var st struct {
		Powered bool `json:"powered"`
	}
	if c.On {
		if err := b.readState(ctx, id, "/screen", &st); err != nil {
			return err
		}
	}
	var calls []apiCall
	for _, r := range homeassistant.BacklightCalls(c, st.Powered) {
		calls = append(calls, callOf(r))
	}
	rep, err := b.callAll(ctx, id, calls)
	if err != nil || !c.On || st.Powered || c.Brightness != nil {
		return err
	}
	var woke struct {
		Backlight int `json:"backlight"`
	}
	if json.Unmarshal(rep.Body, &woke) == nil && woke.Backlight == 0 {
		_, err = b.callAll(ctx, id, []apiCall{{http.MethodPatch, "/screen", []byte(`{"backlight":100}`)}})
	}
	return err
}

// readState reads GET path of a board into v.
func (b *Bridge) readState(ctx context.Context, id, path string, v any) error {
	rep, err := b.callAll(ctx, id, []apiCall{{http.MethodGet, path, nil}})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rep.Body, v); err != nil {
		return fmt.Errorf("board %s: GET %s: %w", id, path, err)
	}
	return nil
}

// lastLEDMode is the last mode other than off the bridge saw board id's
// strip in ("" when none since the gateway started).
func (b *Bridge) lastLEDMode(id string) string {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	if bi, ok := b.boards[id]; ok {
		return bi.ledsOn
	}
	return ""
}
