package dmx

import (
	"cmp"
	"slices"
	"time"
)

// Merging: a universe may be sent by several sources (two desks, a
// backup desk, a desk and a media server). Each source's last frame is
// kept; the universe's look is merged from the sources of the highest
// priority (sACN's per-packet priority 0-200; Art-Net has none and counts
// as DefaultPriority). Among sources of equal priority the dimmer
// channels (channel 1 of every patched fixture) merge highest takes
// precedence, and every other channel takes the value of the source heard
// from last (latest takes precedence). A source silent for its protocol's
// loss time (SourceLossSACN, SourceLossArtNet) is dropped; so is an sACN
// source that says its stream terminated.
const (
	SourceLossSACN   = 2500 * time.Millisecond
	SourceLossArtNet = 4 * time.Second
	// DefaultPriority is an Art-Net source's priority (sACN's default).
	DefaultPriority = 100
	// MaxSources bounds the sources kept per universe; a packet from one
	// more is ignored (counted as dropped, reason "sources").
	MaxSources = 16
)

// Protocols.
const (
	ProtoSACN   = "sacn"
	ProtoArtNet = "artnet"
)

// source is one sender of one universe.
type source struct {
	key      string // protocol + CID or address
	name     string
	proto    string
	addr     string
	priority uint8
	syncAddr uint16
	first    time.Time
	last     time.Time
	order    uint64 // the engine's packet count at its last packet: who was heard last
	packets  uint64
	seq      uint8
	slots    [Slots]byte
	n        int // slots sent
}

// rate is the source's packets per second since it was first heard.
func (s *source) rate() float64 {
	d := s.last.Sub(s.first).Seconds()
	if s.packets < 2 || d <= 0 {
		return 0
	}
	return float64(s.packets-1) / d
}

func (s *source) loss() time.Duration {
	if s.proto == ProtoArtNet {
		return SourceLossArtNet
	}
	return SourceLossSACN
}

// universe is one universe's sources and merged look.
type universe struct {
	num     int
	sources map[string]*source
	// htp marks the slots that merge highest-takes-precedence.
	htp    [Slots]bool
	merged [Slots]byte
	live   bool // has had a source since the last loss
}

func newUniverse(num int, p *Patch) *universe {
	u := &universe{num: num, sources: map[string]*source{}}
	for _, f := range p.Fixtures {
		if f.Universe == num {
			u.htp[f.Address-1] = true // channel 1: the dimmer
		}
	}
	return u
}

// merge recomputes the merged look; it reports whether more than one
// source took part (a merge) and whether the look changed.
func (u *universe) merge() (merged, changed bool) {
	var top uint8
	for _, s := range u.sources {
		top = max(top, s.priority)
	}
	var cands []*source
	for _, s := range u.sources {
		if s.priority == top {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return false, false
	}
	// Heard from first to last, so that the latest source's value is
	// written last (by arrival order: two packets may share a clock
	// reading).
	slices.SortFunc(cands, func(a, b *source) int { return cmp.Compare(a.order, b.order) })
	var out [Slots]byte
	for _, s := range cands {
		for i := range s.n {
			v := s.slots[i]
			if u.htp[i] {
				out[i] = max(out[i], v)
			} else {
				out[i] = v
			}
		}
	}
	changed = out != u.merged
	u.merged = out
	return len(cands) > 1, changed
}

// expire drops the sources silent past their loss time at now and
// returns their names.
func (u *universe) expire(now time.Time) []string {
	var gone []string
	for k, s := range u.sources {
		if now.Sub(s.last) >= s.loss() {
			delete(u.sources, k)
			gone = append(gone, s.name)
		}
	}
	slices.Sort(gone)
	return gone
}

// SourceView is one source of a universe as Sources lists it.
type SourceView struct {
	Universe int       `json:"universe"`
	Protocol string    `json:"protocol"`
	Name     string    `json:"name"`
	Address  string    `json:"address"`
	Priority int       `json:"priority"`
	Rate     float64   `json:"rate_hz"`
	Packets  uint64    `json:"packets"`
	LastSeen time.Time `json:"last_seen"`
	// Winning: the source is of the universe's highest priority.
	Winning bool `json:"winning"`
}
