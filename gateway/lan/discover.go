package lan

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	hmdns "github.com/hashicorp/mdns"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
)

// Found is a board an mDNS browse turned up.
type Found struct {
	Instance string // the service instance name
	Host     string // <hostname>.local.
	Addr     net.IP
	Port     int
	ID       string // from the TXT record, when present
}

// URL is the base URL the LAN driver reaches the board at.
func (f Found) URL() string {
	return "http://" + net.JoinHostPort(f.Addr.String(), strconv.Itoa(f.Port))
}

// Browser asks the network for instances of an mDNS service and returns
// what answered within timeout. BrowseMDNS is the real one; tests pass
// their own.
type Browser func(ctx context.Context, service string, timeout time.Duration) ([]Found, error)

// BrowseMDNS browses the local network by multicast DNS.
func BrowseMDNS(ctx context.Context, service string, timeout time.Duration) ([]Found, error) {
	entries := make(chan *hmdns.ServiceEntry, 64)
	params := hmdns.DefaultParams(service)
	params.Entries = entries
	params.Timeout = timeout
	params.DisableIPv6 = true
	params.Logger = nil
	done := make(chan error, 1)
	go func() { done <- hmdns.QueryContext(ctx, params); close(entries) }()
	var out []Found
	for e := range entries {
		ip := e.AddrV4
		if ip == nil {
			continue
		}
		f := Found{Instance: e.Name, Host: e.Host, Addr: ip, Port: e.Port}
		for _, kv := range e.InfoFields {
			if v, ok := strings.CutPrefix(kv, boardapi.MDNSTxtID+"="); ok {
				f.ID = v
			}
		}
		out = append(out, f)
	}
	if err := <-done; err != nil {
		return out, fmt.Errorf("lan: mdns browse: %w", err)
	}
	return out, nil
}

// DiscoverOptions tune Discover.
type DiscoverOptions struct {
	// Browse finds boards; nil means BrowseMDNS.
	Browse Browser
	// Every is how often the network is browsed (default 30 s).
	Every time.Duration
	// Timeout bounds one browse (default 2 s).
	Timeout time.Duration
	Log     *slog.Logger
}

// Discover browses for holofleet boards (`_holofleet._tcp`) until ctx
// ends and adds every board it finds to the driver; a board found again
// at the same URL is left as it is. Boards that stop answering are not
// removed: the stream's reconnects and the fleet's online state tell that.
func (l *LAN) Discover(ctx context.Context, o DiscoverOptions) error {
	if o.Browse == nil {
		o.Browse = BrowseMDNS
	}
	o.Every = defaults.Positive(o.Every, 30*time.Second)
	o.Timeout = defaults.Positive(o.Timeout, 2*time.Second)
	o.Log = defaults.Log(o.Log)
	known := map[string]bool{}
	for {
		found, err := o.Browse(ctx, boardapi.MDNSService, o.Timeout)
		if err != nil && ctx.Err() == nil {
			o.Log.Warn("mdns browse failed", "err", err)
		}
		for _, f := range found {
			u := f.URL()
			if known[u] {
				continue
			}
			if err := l.Add(u, ""); err != nil {
				o.Log.Warn("mdns: board not added", "url", u, "err", err)
				continue
			}
			known[u] = true
			o.Log.Info("mdns: board found", "url", u, "host", f.Host, "id", f.ID)
		}
		if clock.Sleep(ctx, clock.Real, o.Every) != nil {
			return nil
		}
	}
}
