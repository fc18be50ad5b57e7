package main

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/installation"
)

// newInstallation builds the installation as code: its content store
// (<data>/content) and installer over the gateway's store and fleet,
// served under /v1/installation through the gateway's guard. Its
// goroutine is the engine, which resumes an interrupted apply at start.
// In a cluster (--cluster) the revisions, content and board findings are
// kept in the cluster (gateway/cluster's Installation).
func newInstallation(_ context.Context, e *env) (component, error) {
	contents, err := installation.OpenContents(filepath.Join(e.opts.data, "content"))
	if err != nil {
		return component{}, err
	}
	// Without the gateway's door (a component built alone) a door with
	// no tokens refuses every request.
	guard := e.guard
	if guard == nil {
		guard = &auth.Guard{}
	}
	o := installation.Options{DB: e.db, Fleet: e.fleet, Contents: contents, Audit: guard.Audit,
		Log: e.log.With("component", "installation"), DMX: dmxSection{e}}
	if e.cues != nil {
		o.Cues = e.cues
	}
	banner := "installation: as code under /v1/installation (holoctl install)"
	if e.cluster != nil {
		// In a cluster the revisions, content and findings are the
		// cluster's; this gateway applies to the boards it owns.
		o.Shared = e.cluster.Installation()
		banner += "; revisions shared by the cluster, applied here to this gateway's boards"
	}
	in, err := installation.New(o)
	if err != nil {
		return component{}, err
	}
	if err := e.registerer.Register(in.Collector()); err != nil {
		return component{}, err
	}
	e.installation = in.GRPC()
	e.installStates = installStates(in)
	h := in.Handler(guard)
	e.handle("/v1/installation", h)
	e.handle("/v1/installation/", h)
	e.apiDocs = append(e.apiDocs, installation.OpenAPI)
	return component{name: "installation", run: in.Run,
		banner: []string{banner}}, nil
}

// dmxSection is the DMX patch as the installation's dmx section sets it:
// as PUT /v1/dmx/patch does, saved to the patch file first, then used.
// newDMX runs after newInstallation, so the engine is looked up at each
// call; Patch is nil when no DMX input runs.
type dmxSection struct{ e *env }

func (s dmxSection) Patch() *dmx.Patch {
	if s.e.dmx == nil {
		return nil
	}
	return s.e.dmx.Patch()
}

func (s dmxSection) SetPatch(p *dmx.Patch) error {
	if s.e.dmx == nil {
		return errors.New("dmx: no DMX input runs")
	}
	if err := p.Check(); err != nil {
		return err
	}
	if s.e.dmxSave != nil {
		if err := s.e.dmxSave(p); err != nil {
			return err
		}
	}
	return s.e.dmx.SetPatch(p)
}
