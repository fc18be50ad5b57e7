package link

import (
	"encoding/json"
	"fmt"
	"github.com/holofleet/holofleet/bus/boardapi"
	"net/http"
	"slices"
	"sort"
	"sync"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/firmware/api"
)

// Transport modes of the link.
const (
	ModeUART  = "uart"
	ModeRS485 = "rs485"
	ModeI2C   = "i2c"
)

// Protocols the link speaks on UART and RS485.
const (
	ProtocolAuto   = "auto"   // native frames and JSON lines, told apart by the first byte
	ProtocolJSON   = "json"   // JSON lines only
	ProtocolNative = "native" // native frames only
)

// Settings are the saved link settings (GET/PATCH /link "saved"). A
// change of mode, protocol, baud, address (on I2C), general call or pins
// waits for a restart; groups, address (on UART/RS485), events and attn
// apply at the next start too, as every saved setting does. The shape is
// shared with the gateway through bus/boardapi.
type Settings = boardapi.LinkSettings

// EventSettings say which happenings the host gets and whether they are
// pushed.
type EventSettings = boardapi.LinkEventSettings

// Pins are the GPIO numbers the link uses.
type Pins = boardapi.LinkPins

// Limits of the settings.
const (
	MaxGroups = 8
	MaxPin    = 48
)

// Bauds the UART accepts.
var Bauds = []int{9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600, 1000000}

// DefaultSettings is a new board's link: UART at 115200, both protocols,
// address 1, no groups, no events.
func DefaultSettings() Settings {
	return Settings{Mode: ModeUART, Protocol: ProtocolAuto, Baud: 115200, Address: 1, Groups: []int{},
		Events: EventSettings{Kinds: []string{}}, Pins: Pins{TX: 43, RX: 44, DE: 2, SDA: 5, SCL: 6, Attn: 4}}
}

// ReservedPins are GPIOs other hardware of the board uses; the link may
// not take them (409 pin_in_use).
var ReservedPins = map[int]string{0: "the BOOT button", 15: "the pan servo", 16: "the tilt servo",
	10: "the display (SCK)", 11: "the display (MOSI)", 12: "the display (DC)", 13: "the display (CS)", 14: "the display backlight",
	48: "the LED strip"}

// Patch is the body of PATCH /link: any of the fields.
type Patch struct {
	Mode        *string        `json:"mode,omitempty"`
	Protocol    *string        `json:"protocol,omitempty"`
	Baud        *int           `json:"baud,omitempty"`
	Address     *int           `json:"address,omitempty"`
	Groups      *[]int         `json:"groups,omitempty"`
	Events      *EventSettings `json:"events,omitempty"`
	Attn        *bool          `json:"attn,omitempty"`
	GeneralCall *bool          `json:"general_call,omitempty"`
	Pins        *PinsPatch     `json:"pins,omitempty"`
}

// PinsPatch changes some pins.
type PinsPatch struct {
	TX   *int `json:"tx,omitempty"`
	RX   *int `json:"rx,omitempty"`
	DE   *int `json:"de,omitempty"`
	SDA  *int `json:"sda,omitempty"`
	SCL  *int `json:"scl,omitempty"`
	Attn *int `json:"attn,omitempty"`
}

// ValidateSettings checks s, returning a bad_request or pin_in_use error.
func ValidateSettings(s Settings, ledGPIO int) error {
	switch s.Mode {
	case ModeUART, ModeRS485, ModeI2C:
	default:
		return api.Errorf(api.ErrBadRequest, "mode must be uart, rs485 or i2c, not %q", s.Mode)
	}
	switch s.Protocol {
	case ProtocolAuto, ProtocolJSON, ProtocolNative:
	default:
		return api.Errorf(api.ErrBadRequest, "protocol must be auto, json or native, not %q", s.Protocol)
	}
	if !slices.Contains(Bauds, s.Baud) {
		return api.Errorf(api.ErrBadRequest, "baud must be one of %v", Bauds)
	}
	if s.Address < int(frame.MinBoard) || s.Address > int(frame.MaxBoard) {
		return api.Errorf(api.ErrBadRequest, "address must be %d-%d, not %d", frame.MinBoard, frame.MaxBoard, s.Address)
	}
	if s.Mode == ModeI2C && !i2creg.ValidAddress(uint8(s.Address)) {
		return api.Errorf(api.ErrBadRequest, "address %d is reserved on I2C (use 0x08-0x77)", s.Address)
	}
	if len(s.Groups) > MaxGroups {
		return api.Errorf(api.ErrBadRequest, "at most %d groups", MaxGroups)
	}
	seen := map[int]bool{}
	for _, g := range s.Groups {
		if g < 1 || g > frame.MaxGroup {
			return api.Errorf(api.ErrBadRequest, "group %d: groups are 1-%d", g, frame.MaxGroup)
		}
		if seen[g] {
			return api.Errorf(api.ErrBadRequest, "group %d listed twice", g)
		}
		seen[g] = true
	}
	if err := validKinds(s.Events.Kinds); err != nil {
		return err
	}
	type pin struct {
		name string
		n    int
	}
	var used []pin
	switch s.Mode {
	case ModeUART:
		used = []pin{{"tx", s.Pins.TX}, {"rx", s.Pins.RX}}
	case ModeRS485:
		used = []pin{{"tx", s.Pins.TX}, {"rx", s.Pins.RX}, {"de", s.Pins.DE}}
	case ModeI2C:
		used = []pin{{"sda", s.Pins.SDA}, {"scl", s.Pins.SCL}}
	}
	if s.Attn || s.Mode == ModeI2C {
		used = append(used, pin{"attn", s.Pins.Attn})
	}
	for _, p := range []pin{{"tx", s.Pins.TX}, {"rx", s.Pins.RX}, {"de", s.Pins.DE}, {"sda", s.Pins.SDA}, {"scl", s.Pins.SCL}, {"attn", s.Pins.Attn}} {
		if p.n < 0 || p.n > MaxPin {
			return api.Errorf(api.ErrBadRequest, "pins.%s must be 0-%d, not %d", p.name, MaxPin, p.n)
		}
	}
	for i, p := range used {
		if what, ok := ReservedPins[p.n]; ok {
			return api.Errorf(api.ErrPinInUse, "GPIO %d (pins.%s) is used by %s", p.n, p.name, what)
		}
		if p.n == ledGPIO {
			return api.Errorf(api.ErrPinInUse, "GPIO %d (pins.%s) drives the LED strip", p.n, p.name)
		}
		for _, q := range used[:i] {
			if q.n == p.n {
				return api.Errorf(api.ErrPinInUse, "GPIO %d is both pins.%s and pins.%s", p.n, q.name, p.name)
			}
		}
	}
	return nil
}

// apply returns s changed by p.
func applyPatch(s Settings, p Patch) Settings {
	out := s
	out.Groups = append([]int{}, s.Groups...)
	out.Events.Kinds = append([]string{}, s.Events.Kinds...)
	if p.Mode != nil {
		out.Mode = *p.Mode
	}
	if p.Protocol != nil {
		out.Protocol = *p.Protocol
	}
	if p.Baud != nil {
		out.Baud = *p.Baud
	}
	if p.Address != nil {
		out.Address = *p.Address
	}
	if p.Groups != nil {
		out.Groups = append([]int{}, (*p.Groups)...)
		if out.Groups == nil {
			out.Groups = []int{}
		}
		sort.Ints(out.Groups)
	}
	if p.Events != nil {
		out.Events = EventSettings{Kinds: append([]string{}, p.Events.Kinds...), Push: p.Events.Push}
	}
	if p.Attn != nil {
		out.Attn = *p.Attn
	}
	if p.GeneralCall != nil {
		out.GeneralCall = *p.GeneralCall
	}
	if pp := p.Pins; pp != nil {
		for _, f := range []struct {
			v   *int
			dst *int
		}{{pp.TX, &out.Pins.TX}, {pp.RX, &out.Pins.RX}, {pp.DE, &out.Pins.DE}, {pp.SDA, &out.Pins.SDA}, {pp.SCL, &out.Pins.SCL}, {pp.Attn, &out.Pins.Attn}} {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
	}
	return out
}

// Store keeps the saved settings (a store.Bucket).
type Store interface {
	Get(key string, v any) (bool, error)
	Put(key string, v any) error
}

const storeKey = "link"

// saved holds the saved settings and the ones the link runs with.
type saved struct {
	store   Store
	ledGPIO int
	mu      sync.Mutex
	cur     Settings
	running Settings
}

func loadSettings(st Store, ledGPIO int) (*saved, error) {
	s := &saved{store: st, ledGPIO: ledGPIO, cur: DefaultSettings()}
	if _, err := st.Get(storeKey, &s.cur); err != nil {
		return nil, fmt.Errorf("link: load settings: %w", err)
	}
	if s.cur.Groups == nil {
		s.cur.Groups = []int{}
	}
	if s.cur.Events.Kinds == nil {
		s.cur.Events.Kinds = []string{}
	}
	if err := ValidateSettings(s.cur, ledGPIO); err != nil {
		// A saved value the firmware no longer accepts: start from defaults
		// rather than refuse to start.
		s.cur = DefaultSettings()
	}
	s.running = s.cur
	return s, nil
}

func (s *saved) get() (cur, running Settings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.running
}

func (s *saved) patch(p Patch) (Settings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := applyPatch(s.cur, p)
	if err := ValidateSettings(next, s.ledGPIO); err != nil {
		return Settings{}, err
	}
	if err := s.store.Put(storeKey, next); err != nil {
		return Settings{}, fmt.Errorf("link: save: %w", err)
	}
	s.cur = next
	return next, nil
}

// restartRequired reports whether saved settings differ from the running
// ones in a way only a restart applies.
func restartRequired(cur, running Settings) bool {
	a, _ := json.Marshal(cur)
	b, _ := json.Marshal(running)
	return string(a) != string(b)
}

// State is the reply of GET and PATCH /link.
type State = boardapi.LinkState

func (srv *Server) state() State {
	cur, running := srv.settings.get()
	return State{Protocol: frame.ProtocolVersion, Saved: cur, Running: running,
		RestartRequired: restartRequired(cur, running), Transport: srv.transportName(), Counters: srv.Counters()}
}

func (srv *Server) settingsRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/link", Link: true, Summary: "Link settings (saved and running) and counters",
			Response: State{}, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				api.WriteJSON(w, http.StatusOK, srv.state())
			})},
		{Method: http.MethodPatch, Path: "/link", Link: true, Summary: "Change the saved link settings (apply at restart)",
			Request: Patch{}, Response: State{}, Errors: []*api.Error{api.ErrPinInUse},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var p Patch
				if err := api.Decode(r, &p, false); err != nil {
					api.WriteError(w, err)
					return
				}
				if p.Mode != nil && *p.Mode == ModeI2C && srv.o.NoI2CTarget != "" {
					api.WriteError(w, api.Errorf(api.ErrBadRequest, "mode i2c is not available on this board: %s", srv.o.NoI2CTarget))
					return
				}
				if _, err := srv.settings.patch(p); err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, srv.state())
			})},
	}
}
