package assemble

import (
	"context"
	"net"
	"path/filepath"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/network"
	"github.com/holofleet/holofleet/firmware/network/mdns"
)

// NetworkOptions are the command-line settings of the network feature.
type NetworkOptions struct {
	// APAddr is where the simulated access point serves the API while it
	// is on (default 127.0.0.1:0, a free port).
	APAddr string
	// OnAPOpen is told the access point's address each time it opens.
	OnAPOpen func(net.Addr)
	// MDNS turns the mDNS announcement on (off by default: tests and
	// sandboxes send no multicast).
	MDNS bool
}

// RadioFile is the radio environment's file name in the data directory.
const RadioFile = "radio.json"

type networkKey struct{}

// NetworkOf returns the boot's network (for the console and the
// simulator's BOOT button: NetworkOf(b).PressBoot()).
func NetworkOf(b *board.Boot) *network.Network {
	n, _ := b.Value(networkKey{}).(*network.Network)
	return n
}

// Network installs the simulated Wi-Fi: the radio file under the data
// directory, the station, the access point on its own listener and, when
// asked, mDNS. The access point's listener outlives restarts so it keeps
// its port.
func Network(o NetworkOptions) board.Feature {
	if o.APAddr == "" {
		o.APAddr = "127.0.0.1:0"
	}
	var ap *network.APListener
	return func(b *board.Boot) error {
		if ap == nil {
			ap = &network.APListener{Addr: o.APAddr, Handler: b.Board, OnOpen: o.OnAPOpen, Log: b.Log.With("part", "ap")}
		}
		id := b.Board.Identity()
		opts := network.Options{Clock: b.Clock, Store: b.Board.DB().Bucket("network"),
			RadioPath: filepath.Join(b.Board.DataDir(), RadioFile), Publisher: b.Hub,
			Logger: b.Log.With("part", "network"), DefaultAPName: id.DefaultHostname(), DefaultAPPassphrase: id.ID,
			Hostname: b.Web.Hostname, Addr: b.Addr(), Long: b.Long, AP: ap}
		if o.MDNS {
			opts.Announcer = &mdns.Responder{Zone: &mdns.Zone{ID: id.ID, Version: buildinfo.Running().Version},
				Log: b.Log.With("part", "mdns")}
		}
		n, err := network.New(opts)
		if err != nil {
			return err
		}
		b.OnClose(n.Close)
		b.Network = n
		b.Set(networkKey{}, n)
		b.Web.OnHostname(n.HostnameChanged)
		b.Go(func(ctx context.Context) { _ = n.Run(ctx) })
		b.AddFeature("network", n.Routes()...)
		return nil
	}
}
