package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/osc"
)

// oscFlags are the OSC front door's options.
type oscFlags struct {
	addr   setString // --osc ADDR; off when not given (127.0.0.1:0 in demo mode)
	access string    // none | read | show
}

func addOSCFlags(fs *flag.FlagSet, f *oscFlags) {
	fs.Var(&f.addr, "osc", "OSC over UDP and TCP on this host:port (off by default; demo: 127.0.0.1 on a free port; \"off\" turns it off)")
	fs.StringVar(&f.access, "osc-access", "show", "what OSC clients may do (OSC has no authentication): none, read (subscriptions and feedback) or show (also show actions)")
}

// oscRole is the role every OSC client gets.
func oscRole(access string) (auth.Role, error) {
	switch access {
	case "none":
		return auth.RoleNone, nil
	case "read":
		return auth.RoleViewer, nil
	case "show":
		return auth.RoleOperator, nil
	}
	return 0, fmt.Errorf("%w: --osc-access %q: none, read or show", errUsage, access)
}

// checkOSCAddr refuses an --osc value that is not host:port with a port
// number 0-65535 (a service name or an out-of-range port would only fail
// when the front door starts).
func checkOSCAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("want host:port, the port a number 0-65535")
	}
	return nil
}

// newOSC starts the OSC front door (gateway/osc) when --osc is given (or
// in demo mode).
func newOSC(_ context.Context, e *env) (component, error) {
	f := e.opts.osc
	addr := f.addr.v
	if !f.addr.set && e.demo {
		addr = "127.0.0.1:0"
	}
	if addr == "" || addr == "off" {
		return component{name: "osc", banner: []string{"osc:      off (--osc ADDR turns it on)"}}, nil
	}
	role, err := oscRole(f.access)
	if err != nil {
		return component{}, err
	}
	var cues osc.Cues
	if e.cues != nil {
		cues = e.cues
	}
	s, err := osc.Listen(osc.Options{Addr: addr, Fleet: e.fleet, Cues: cues, Guard: e.guard, Role: role,
		Log: e.log.With("component", "osc"), Registerer: e.registerer})
	if err != nil {
		return component{}, err
	}
	lines := []string{fmt.Sprintf("osc:      udp+tcp %s  (clients act as %v: --osc-access %s; no authentication)", s.Addr(), role, f.access)}
	if !auth.IsLoopback(s.Addr()) && role != auth.RoleNone {
		w := fmt.Sprintf("WARNING: anyone who reaches %s may use OSC as %v", s.Addr(), role)
		lines = append(lines, "osc:      "+w)
		e.log.Warn("osc: " + w)
	}
	return component{name: "osc", run: s.Run, banner: lines}, nil
}
