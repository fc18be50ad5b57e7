package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/dmx/artnet"
)

// DMXPatchFile is the patch file's default name in the data directory.
const DMXPatchFile = "dmx-patch.json"

// dmxFlags are the DMX inputs' options (docs/dmx.md).
type dmxFlags struct {
	sacn, artnet setString // off when not given (127.0.0.1:0 in demo mode)
	patch        string
	access       string
	lineShare    float64
}

func addDMXFlags(fs *flag.FlagSet, f *dmxFlags) {
	fs.Var(&f.sacn, "sacn", "sACN (E1.31) input on this host:port (off by default; \":5568\" joins the patched universes' multicast groups; demo: 127.0.0.1 on a free port)")
	fs.Var(&f.artnet, "artnet", "Art-Net input on this host:port (off by default; \":6454\" is Art-Net's port; demo: 127.0.0.1 on a free port)")
	fs.StringVar(&f.patch, "dmx-patch", "", "DMX patch file (JSON, docs/dmx.md; default DATA/"+DMXPatchFile+"; the demo patches its groups and boards when there is none)")
	fs.StringVar(&f.access, "dmx-access", "show", "what DMX sources may do (DMX has no authentication): none, read (merged and listed, nothing sent) or show (drive the patched boards)")
	fs.Float64Var(&f.lineShare, "dmx-line-share", dmx.DefaultLineShare, "share of an RS485 line's capacity DMX changes may take (0-1)")
}

// check refuses bad DMX flags before anything starts.
func (f *dmxFlags) check() error {
	if _, err := dmxRole(f.access); err != nil {
		return err
	}
	for name, a := range map[string]setString{"sacn": f.sacn, "artnet": f.artnet} {
		if a.set && a.v != "off" {
			if err := checkOSCAddr(a.v); err != nil {
				return fmt.Errorf("%w: --%s %q: %v", errUsage, name, a.v, err)
			}
		}
	}
	if f.lineShare <= 0 || f.lineShare > 1 {
		return fmt.Errorf("%w: --dmx-line-share %g: a share above 0, at most 1", errUsage, f.lineShare)
	}
	return nil
}

// dmxRole is every DMX source's role: the --osc-access model.
func dmxRole(access string) (auth.Role, error) {
	r, err := oscRole(access)
	if err != nil {
		return 0, fmt.Errorf("%w: --dmx-access %q: none, read or show", errUsage, access)
	}
	return r, nil
}

// newDMX starts the DMX inputs (gateway/dmx) when --sacn or --artnet is
// given (both in demo mode), and serves the patch on the API.
func newDMX(_ context.Context, e *env) (component, error) {
	f := e.opts.dmx
	addr := func(s setString) string {
		if !s.set && e.demo {
			return "127.0.0.1:0"
		}
		if s.v == "off" {
			return ""
		}
		return s.v
	}
	sacnAddr, artAddr := addr(f.sacn), addr(f.artnet)
	if sacnAddr == "" && artAddr == "" {
		return component{name: "dmx", banner: []string{"dmx:      off (--sacn ADDR, --artnet ADDR turn the inputs on)"}}, nil
	}
	role, err := dmxRole(f.access)
	if err != nil {
		return component{}, err
	}
	path := f.patch
	if path == "" {
		path = filepath.Join(e.opts.data, DMXPatchFile)
	}
	patch, err := dmx.ReadPatchFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && e.demo:
		patch = demoDMXPatch(e.opts)
	case errors.Is(err, fs.ErrNotExist):
		patch = &dmx.Patch{}
	case err != nil:
		return component{}, fmt.Errorf("dmx: %w", err)
	}
	log := e.log.With("component", "dmx")
	eng, err := dmx.New(dmx.Options{Fleet: e.fleet, Patch: patch, Guard: e.guard, Role: role, Log: log,
		Registerer: e.registerer, LineShare: f.lineShare})
	if err != nil {
		return component{}, err
	}
	e.shows.dmx.Store(eng)
	var lines, inputs []string
	var ls []*dmx.Listener
	if sacnAddr != "" {
		l, err := dmx.ListenSACN(sacnAddr, eng, log)
		if err != nil {
			return component{}, err
		}
		ls = append(ls, l)
		mc := "unicast; bound to one address, so no multicast"
		if len(l.Joined) > 0 {
			mc = "multicast " + strings.Join(l.Joined, " ")
		}
		inputs = append(inputs, "sacn udp "+l.Addr())
		lines = append(lines, fmt.Sprintf("sacn:     udp %s  (%s)", l.Addr(), mc))
	}
	if artAddr != "" {
		host, _ := os.Hostname()
		l, err := dmx.ListenArtNet(artAddr, eng, artnet.PollReply{ShortName: "holo-gateway",
			LongName: "holofleet gateway " + host, Report: "holo-gateway " + buildinfo.Version}, log)
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return component{}, err
		}
		ls = append(ls, l)
		inputs = append(inputs, "artnet udp "+l.Addr())
		lines = append(lines, fmt.Sprintf("artnet:   udp %s  (Port-Address P is universe P+1; ArtPoll answered as holo-gateway)", l.Addr()))
		lines = append(lines, "artnet:   "+artTimecode(l, e, role))
	}
	lines = append(lines, fmt.Sprintf("dmx:      sources act as %v (--dmx-access %s; no authentication); patch %s (GET/PUT /v1/dmx/patch, holoctl dmx patch)", role, f.access, path))
	if len(patch.Fixtures) == 0 {
		lines = append(lines, "dmx:      nothing patched yet")
	}
	for _, fx := range patch.Fixtures {
		lines = append(lines, "dmx:        "+fx.String())
	}
	for _, l := range ls {
		if !auth.IsLoopback(l.Addr()) && role != auth.RoleNone {
			w := fmt.Sprintf("WARNING: anyone who reaches %s may drive the patched boards as %v", l.Addr(), role)
			lines = append(lines, "dmx:      "+w)
			log.Warn("dmx: " + w)
		}
	}
	save := func(p *dmx.Patch) error { return savePatch(path, p) }
	e.dmx, e.dmxSave = eng, save
	e.handle(dmx.PatchPath, &dmx.Handler{Engine: eng, Guard: e.guard, Save: save,
		Inputs: func() []string { return inputs }})
	run := func(ctx context.Context) error {
		var wg sync.WaitGroup
		errs := make([]error, len(ls)+1)
		wg.Go(func() { errs[0] = eng.Run(ctx) })
		for i, l := range ls {
			wg.Go(func() { errs[i+1] = l.Run(ctx) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return component{name: "dmx", run: run, banner: lines}, nil
}

// savePatch writes the patch file atomically (a temporary file renamed).
func savePatch(path string, p *dmx.Patch) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("dmx: save the patch: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("dmx: save the patch: %w", err)
	}
	return nil
}

// artTimecode lets the Art-Net listener's ArtTimeCode chase the cue lists
// when DMX sources' role may run cues (--dmx-access show), and says what
// it did for the banner.
func artTimecode(l *dmx.Listener, e *env, role auth.Role) string {
	if e.cues == nil {
		return "ArtTimeCode not read (no cue engine)"
	}
	d := auth.Authorize(auth.Attributes{Who: auth.Identity{Role: role}, Surface: dmx.Surface, Verb: auth.VerbAct, Resource: auth.ResCues})
	if !d.Allowed {
		return fmt.Sprintf("ArtTimeCode not followed (--dmx-access %s may not run cues)", e.opts.dmx.access)
	}
	l.Timecode = e.cues
	return "ArtTimeCode (stream 0) chases the cue lists' timecoded cues"
}
