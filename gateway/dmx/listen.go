package dmx

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/dmx/artnet"
	"github.com/holofleet/holofleet/gateway/dmx/sacn"
	"github.com/holofleet/holofleet/gateway/timecode"
)

// Listener is one UDP input: sACN or Art-Net. Make it with ListenSACN or
// ListenArtNet, run it with Run.
type Listener struct {
	proto string
	conn  *net.UDPConn
	e     *Engine
	log   *slog.Logger
	// Art-Net: what the gateway says of itself to a poll.
	reply artnet.PollReply
	// polls rate-limits poll replies per host (a reply is 17 times a
	// poll's size: never an amplifier).
	mu    sync.Mutex
	polls map[netip.Addr]time.Time
	// Joined lists the multicast groups joined (sACN; read it before
	// Run, or under a patch change's lock).
	Joined []string
	// Timecode, set before Run (Art-Net), is handed the timecode of
	// every ArtTimeCode packet of the master stream (StreamId 0) that
	// timecode.Decode reads; nil ignores ArtTimeCode.
	Timecode TimecodeSink
}

// TimecodeSink takes incoming timecode (cue.Engine: the cue lists chase
// it); source names the input ("artnet").
type TimecodeSink interface {
	Timecode(source string, t timecode.Timecode) error
}

// MinPollInterval is the least time between two poll replies to one host.
const MinPollInterval = 500 * time.Millisecond

// ListenSACN binds the sACN input on addr (host:port; ":5568" is every
// address on E1.31's port). Bound to an unspecified host, it joins the
// multicast group of every patched universe (and of sync address 0's
// none) on every multicast interface that is up; unicast always works.
func ListenSACN(addr string, e *Engine, log *slog.Logger) (*Listener, error) {
	l, err := listen(ProtoSACN, addr, e, log)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		l.join()
		e.OnPatch(l.join)
	}
	return l, nil
}

// join joins the multicast groups of the patched universes not joined
// yet, on every multicast interface that is up.
func (l *Listener) join() {
	pc := ipv4.NewPacketConn(l.conn)
	ifs, _ := net.Interfaces()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.e.Universes() {
		g := sacn.MulticastAddr(uint16(u))
		for _, ifi := range ifs {
			key := fmt.Sprintf("%s@%s", g, ifi.Name)
			if slices.Contains(l.Joined, key) {
				continue
			}
			if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 {
				continue
			}
			if err := pc.JoinGroup(&ifi, &net.UDPAddr{IP: g.AsSlice()}); err != nil {
				l.log.Debug("dmx: sacn: join", "group", g, "iface", ifi.Name, "err", err)
				continue
			}
			l.Joined = append(l.Joined, key)
		}
	}
}

// ListenArtNet binds the Art-Net input on addr (":6454" is Art-Net's
// port on every address); reply is what it answers an ArtPoll with (its
// IP, when unset, is the listener's address, or bound to every address
// the one the poller reaches the host at; Ports come from the patch).
func ListenArtNet(addr string, e *Engine, reply artnet.PollReply, log *slog.Logger) (*Listener, error) {
	l, err := listen(ProtoArtNet, addr, e, log)
	if err != nil {
		return nil, err
	}
	ports := func() []uint16 {
		var ps []uint16
		for _, u := range e.Universes() {
			if u-1 <= artnet.MaxPortAddress && len(ps) < 4 {
				ps = append(ps, uint16(u-1))
			}
		}
		return ps
	}
	if len(reply.Ports) == 0 {
		reply.Ports = ports()
		e.OnPatch(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.reply.Ports = ports()
		})
	}
	l.reply = reply
	return l, nil
}

func listen(proto, addr string, e *Engine, log *slog.Logger) (*Listener, error) {
	log = defaults.Log(log)
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("dmx: %s: %w", proto, err)
	}
	conn, err := net.ListenUDP("udp4", ua)
	if err != nil {
		return nil, fmt.Errorf("dmx: %s: %w", proto, err)
	}
	return &Listener{proto: proto, conn: conn, e: e, log: log, polls: map[netip.Addr]time.Time{}}, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() string { return l.conn.LocalAddr().String() }

// Run reads packets until ctx ends, then closes the socket.
func (l *Listener) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	defer l.conn.Close()
	buf := make([]byte, 1500)
	for {
		n, from, err := l.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dmx: %s: %w", l.proto, err)
		}
		if l.proto == ProtoSACN {
			l.sacn(buf[:n], from)
		} else {
			l.artnet(buf[:n], from)
		}
	}
}

func (l *Listener) sacn(b []byte, from netip.AddrPort) {
	var d sacn.Data
	var s sacn.Sync
	p, err := sacn.Decode(b, &d, &s)
	switch {
	case errors.Is(err, sacn.ErrIgnored):
		return
	case err != nil:
		l.e.m.dropped.WithLabelValues("malformed").Inc()
		l.log.Debug("dmx: sacn: bad packet", "from", from, "err", err)
		return
	case p.Sync != nil:
		l.e.Sync(ProtoSACN, p.Sync.SyncAddr)
		return
	}
	if d.Preview() || d.StartCode != 0 {
		return // not for output: a visualiser's data, or not dimmer data
	}
	name := d.SourceName
	if name == "" {
		name = from.Addr().String()
	}
	l.e.Data(Frame{Proto: ProtoSACN, Universe: int(d.Universe), Key: hex.EncodeToString(d.CID[:]), Name: name,
		Addr: from.String(), Priority: d.Priority, Sequence: d.Sequence, HasSequence: true, SyncAddr: d.SyncAddr,
		Terminated: d.Terminated(), Slots: d.Slots})
}

func (l *Listener) artnet(b []byte, from netip.AddrPort) {
	if len(b) >= 10 && binary.LittleEndian.Uint16(b[8:10]) == timecode.OpTimeCode {
		l.timecode(b, from)
		return
	}
	var d artnet.Dmx
	var poll artnet.Poll
	p, err := artnet.Decode(b, &d, &poll)
	switch {
	case errors.Is(err, artnet.ErrIgnored):
		return
	case err != nil:
		l.e.m.dropped.WithLabelValues("malformed").Inc()
		l.log.Debug("dmx: artnet: bad packet", "from", from, "err", err)
		return
	}
	switch p.Op {
	case artnet.OpSync:
		l.e.Sync(ProtoArtNet, 0)
	case artnet.OpPoll:
		l.answerPoll(from)
	case artnet.OpDmx:
		l.e.Data(Frame{Proto: ProtoArtNet, Universe: int(d.PortAddress) + 1, Key: from.Addr().String(),
			Name: "artnet " + from.Addr().String(), Addr: from.String(), Priority: DefaultPriority,
			Sequence: d.Sequence, HasSequence: d.Sequence != 0, Slots: d.Slots})
	}
}

// timecode hands an ArtTimeCode packet's timecode to l.Timecode. A
// broken one is dropped as malformed; another stream than the master is
// ignored.
func (l *Listener) timecode(b []byte, from netip.AddrPort) {
	if l.Timecode == nil {
		return
	}
	p, err := timecode.Decode(b)
	if err != nil {
		l.e.m.dropped.WithLabelValues("malformed").Inc()
		l.log.Debug("dmx: artnet: bad timecode", "from", from, "err", err)
		return
	}
	if p.StreamID != 0 {
		return
	}
	if err := l.Timecode.Timecode(ProtoArtNet, p.Timecode); err != nil {
		l.log.Debug("dmx: artnet: timecode refused", "from", from, "err", err)
	}
}

// answerPoll sends the poll reply to the poller, at most once per
// MinPollInterval per host.
func (l *Listener) answerPoll(to netip.AddrPort) {
	now := l.e.clk.Now()
	l.mu.Lock()
	last, seen := l.polls[to.Addr()]
	ok := !seen || now.Sub(last) >= MinPollInterval
	if ok {
		if len(l.polls) > 1024 {
			clear(l.polls)
		}
		l.polls[to.Addr()] = now
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	l.e.m.polls.Inc()
	l.mu.Lock()
	r := l.reply
	l.mu.Unlock()
	if !r.IP.IsValid() || r.IP.IsUnspecified() {
		// Art-Net 4: the reply carries the node's IP address, which a
		// controller's node list shows and may address; 0.0.0.0 names
		// no node. It is the address the poller reaches this host at.
		// (OLA sends to the reply's source address instead.)
		r.IP = l.localAddr(to)
	}
	reply := artnet.AppendPollReply(nil, r)
	if _, err := l.conn.WriteToUDPAddrPort(reply, to); err != nil {
		l.log.Debug("dmx: artnet: poll reply", "to", to, "err", err)
	}
}

// localAddr is this host's IPv4 address toward to: the listener's own
// when it is bound to one, else the source address the routing table
// gives (a connected UDP socket, nothing sent); invalid when neither.
func (l *Listener) localAddr(to netip.AddrPort) netip.Addr {
	if a, ok := l.conn.LocalAddr().(*net.UDPAddr); ok {
		if ip := a.AddrPort().Addr().Unmap(); ip.Is4() && !ip.IsUnspecified() {
			return ip
		}
	}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		return netip.Addr{}
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok {
		if ip := a.AddrPort().Addr().Unmap(); ip.Is4() {
			return ip
		}
	}
	return netip.Addr{}
}

// Close closes the socket of a listener that will not Run.
func (l *Listener) Close() error { return l.conn.Close() }
