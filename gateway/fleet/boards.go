package fleet

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/registry"
)

// Offline reasons the core gives itself (drivers give theirs in Lost).
const (
	ReasonNotSeen  = "not seen since the gateway started"
	ReasonReplaced = "another board answers at its place"
)

// boardState is what the core tracks of one board. Guarded by Fleet.mu.
type boardState struct {
	rec    registry.Record
	refs   map[Ref]*refState
	online bool
	reason string

	// epoch counts the board's boots seen by the gateway; window holds
	// the happening numbers seen in this epoch.
	epoch   uint64
	epochAt time.Time
	window  seqWindow
	states  map[string]json.RawMessage // last state per kind, to drop repeats
	events  uint64

	dirty  bool // last seen changed: write with the next periodic flush
	urgent bool // something else changed: write now

	fire     bool // its /info lists the fire feature (scheduled changes)
	clipSync bool // its /info lists the clip-sync extension
}

// refState is one place the board is reached at.
type refState struct {
	online bool
	reason string
	epoch  uint64 // the board epoch this ref last reported a restart for
	// clock is the last clock estimate measured here (nil: none since
	// the board's boot began).
	clock *BoardClock
}

func newBoardState(rec registry.Record) *boardState {
	rec = rec.Clone()
	if rec.Groups == nil {
		rec.Groups = []int{}
	}
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	return &boardState{rec: rec, refs: map[Ref]*refState{}, reason: ReasonNotSeen, states: map[string]json.RawMessage{}}
}

// transports lists the drivers of the refs that reach the board now.
func (b *boardState) transports() []string {
	var out []string
	for r, st := range b.refs {
		if st.online && !slices.Contains(out, r.Driver) {
			out = append(out, r.Driver)
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func (b *boardState) record() registry.Record {
	rec := b.rec.Clone()
	if t := b.transports(); len(t) > 0 {
		rec.Transports = t
	}
	return rec
}

func (b *boardState) view() BoardView {
	rec := b.rec
	return BoardView{ID: rec.ID, Hostname: rec.Hostname, Address: rec.Address, Line: rec.Line, URL: rec.URL,
		Groups: slices.Clone(rec.Groups), Labels: maps.Clone(rec.Labels), Online: b.online,
		OfflineReason: b.offlineReason(), Firmware: rec.Firmware, LastSeen: rec.LastSeen, Transports: b.transports(),
		Clock: b.clock()}
}

// clock is the sharpest clock estimate among the places that reach the
// board now (nil when none has one).
func (b *boardState) clock() *BoardClock {
	var best *BoardClock
	for _, st := range b.refs {
		if st.online && st.clock != nil && (best == nil || st.clock.UncertaintyUS < best.UncertaintyUS ||
			(st.clock.UncertaintyUS == best.UncertaintyUS && st.clock.Via < best.Via)) {
			best = st.clock
		}
	}
	if best == nil {
		return nil
	}
	c := *best
	return &c
}

func (b *boardState) offlineReason() string {
	if b.online {
		return ""
	}
	return b.reason
}

// matches reports whether the board passes f.
func (b *boardState) matches(f Filter) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, b.rec.ID) {
		return false
	}
	if f.Group != 0 && !slices.Contains(b.rec.Groups, f.Group) {
		return false
	}
	if f.Firmware != "" && b.rec.Firmware != f.Firmware {
		return false
	}
	if f.Online != nil && *f.Online != b.online {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := b.rec.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Boards lists the boards matching f, ordered by id.
func (f *Fleet) Boards(flt Filter) []BoardView {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []BoardView{}
	for _, id := range sortedKeys(f.boards) {
		if b := f.boards[id]; b.matches(flt) {
			out = append(out, b.view())
		}
	}
	return out
}

// Board returns one board, or ErrUnknownBoard.
func (f *Fleet) Board(id string) (BoardView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boards[id]
	if !ok {
		return BoardView{}, fmt.Errorf("%w: %q", ErrUnknownBoard, id)
	}
	return b.view(), nil
}

// SetLabels replaces a board's labels (an empty map clears them) and
// saves them at once. Bad labels fail with registry.ErrBadLabel; a failed
// save keeps the old labels and counts in Stats.PersistErrors, as the
// background writes do.
func (f *Fleet) SetLabels(id string, labels map[string]string) (BoardView, error) {
	if err := registry.ValidateLabels(labels); err != nil {
		return BoardView{}, err
	}
	f.persistMu.Lock()
	defer f.persistMu.Unlock()
	f.mu.Lock()
	b, ok := f.boards[id]
	if !ok {
		f.mu.Unlock()
		return BoardView{}, fmt.Errorf("%w: %q", ErrUnknownBoard, id)
	}
	old := b.rec.Labels
	b.rec.Labels = maps.Clone(labels)
	if b.rec.Labels == nil {
		b.rec.Labels = map[string]string{}
	}
	rec, view := b.record(), b.view()
	f.mu.Unlock()
	if f.o.Registry != nil {
		if err := f.o.Registry.Put(rec); err != nil {
			f.mu.Lock()
			b.rec.Labels = old
			f.st.persistErrors++
			f.mu.Unlock()
			return BoardView{}, err
		}
	}
	return view, nil
}

// LinePrefix starts the driver name of an RS485 line: "rs485:" and the
// line's name.
const LinePrefix = "rs485:"

// LineName is the line's name as BoardView.Line and the line metrics
// show it: the driver name without LinePrefix (another driver's name
// stays as it is).
func LineName(driver string) string {
	if n, ok := strings.CutPrefix(driver, LinePrefix); ok {
		return n
	}
	return driver
}

// setPlace records where ref says the board is; it reports a change.
func (f *Fleet) setPlace(b *boardState, ref Ref) bool {
	if _, isLine := f.lines[ref.Driver]; isLine {
		addr, err := strconv.Atoi(ref.Addr)
		if err != nil {
			return false
		}
		line := LineName(ref.Driver)
		if b.rec.Line == line && b.rec.Address == addr {
			return false
		}
		b.rec.Line, b.rec.Address = line, addr
		return true
	}
	if b.rec.URL == ref.Addr {
		return false
	}
	b.rec.URL = ref.Addr
	return true
}

// infoFields are the parts of GET /info the core keeps.
type infoFields struct {
	ID       string `json:"id"`
	Hostname string `json:"hostname"`
	Firmware struct {
		Version string `json:"version"`
	} `json:"firmware"`
	Features   []string `json:"features"`
	Extensions []string `json:"extensions"`
}

// linkFields are the parts of GET /link the core keeps.
type linkFields struct {
	Running struct {
		Groups []int `json:"groups"`
	} `json:"running"`
}
