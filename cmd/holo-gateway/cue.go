package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
)

// cueFlags are the cue engine's options.
type cueFlags struct {
	lead      time.Duration
	asap      bool
	freewheel int
}

func addCueFlags(fs *flag.FlagSet, f *cueFlags) {
	fs.DurationVar(&f.lead, "cue-lead", cue.DefaultLead, "how far ahead of a GO its cue fires, so that every board changes on the same moment (at most 60s)")
	fs.BoolVar(&f.asap, "cue-asap", false, "every GO fires at once (no common moment; boards change as they are reached)")
	fs.IntVar(&f.freewheel, "cue-freewheel", cue.DefaultFreewheel, "frames a timecode chase runs on when timecode stops (0: none)")
}

func (f cueFlags) check() error {
	if f.lead <= 0 || f.lead > fleet.MaxFireLead {
		return fmt.Errorf("--cue-lead %v: more than 0, at most %v", f.lead, fleet.MaxFireLead)
	}
	if f.freewheel < 0 {
		return errors.New("--cue-freewheel: 0 or more frames")
	}
	return nil
}

// newCues starts the cue engine (gateway/cue) with its REST routes; in
// demo mode it loads the demo's show when the store has none of its name.
// In a cluster its actions go through the cluster's routing (e.service),
// so a cue reaches boards other gateways own; each gateway runs its own
// lists (docs/show.md).
func newCues(_ context.Context, e *env) (component, error) {
	f := e.opts.cue
	fw := f.freewheel
	if fw == 0 {
		fw = -1 // the engine's "none"
	}
	eng, err := cue.New(cue.Options{DB: e.db, Fleet: e.service(), Log: e.log.With("component", "cue"),
		Lead: f.lead, ASAP: f.asap, Freewheel: fw, Registerer: e.registerer})
	if err != nil {
		return component{}, err
	}
	if show, ok := demoShow(); ok && e.demo {
		if _, err := eng.Get(show.Name); errors.Is(err, cue.ErrNoList) {
			if _, err := eng.Put(show); err != nil {
				return component{}, fmt.Errorf("demo show: %w", err)
			}
		}
	}
	e.cues = eng // served by the API as CueService (api.Config.Cues)
	lines := []string{fmt.Sprintf("cues:     %d cue list(s); GO: holoctl cue go, POST /v1/cuelists/NAME/go, OSC /holo/cue/go", len(eng.Lists()))}
	return component{name: "cue", run: eng.Run, banner: lines}, nil
}

// mqttCueButtons keeps the MQTT bridge's Home Assistant buttons (one GO
// per cue list) in step with the lists until ctx ends.
func mqttCueButtons(ctx context.Context, eng *cue.Engine, b *mqtt.Bridge) {
	if eng == nil {
		return
	}
	ch := eng.Watch(ctx)
	names := func() []string {
		var out []string
		for _, l := range eng.Lists() {
			out = append(out, l.Name)
		}
		return out
	}
	b.SetCueLists(names())
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-ch:
			if !ok {
				if _, err := eng.State(""); ctx.Err() != nil || errors.Is(err, cue.ErrClosed) {
					return
				}
				ch = eng.Watch(ctx) // cut off for falling behind: watch again
				b.SetCueLists(names())
				continue
			}
			if ev.Type == cue.EventEdited || ev.Type == cue.EventDeleted {
				b.SetCueLists(names())
			}
		}
	}
}
