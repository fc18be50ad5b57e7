package dmx

import "slices"

// Input is a patched fixture whose universe has a live source now.
type Input struct {
	Fixture Fixture
	// Sources names the universe's live sources ("grandMA3 (sacn)").
	Sources []string
}

// Active lists the patched fixtures whose universe has a source that is
// not lost (heard within its loss time), for the rollouts' show guard:
// a desk driving a board means a show is using it. It only reads.
func (e *Engine) Active() []Input {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clk.Now()
	var out []Input
	for _, f := range e.patch.Fixtures {
		u := e.unis[f.Universe]
		if u == nil {
			continue
		}
		var names []string
		for _, s := range u.sources {
			if now.Sub(s.last) < s.loss() {
				names = append(names, s.name+" ("+s.proto+")")
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			out = append(out, Input{Fixture: f, Sources: names})
		}
	}
	return out
}
