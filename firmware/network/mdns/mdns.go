// Package mdns announces a board on its LAN with multicast DNS: the name
// <hostname>.local (an A record for the board's address) and its HTTP API
// as DNS-SD services, so browsers, the gateway and ordinary tools
// (avahi-browse, dns-sd) find it.
//
// Records answered (all in the answer section, as the responder of
// github.com/hashicorp/mdns sends them):
//
//	<host>.local.                    A    the board's IPv4 address   TTL 120
//	_http._tcp.local.                PTR  <host>._http._tcp.local.   TTL 4500
//	<host>._http._tcp.local.         SRV  0 0 <port> <host>.local.   TTL 120
//	<host>._http._tcp.local.         TXT  "path=/api/v1"             TTL 4500
//	_holofleet._tcp.local.           PTR  <host>._holofleet._tcp.local.
//	<host>._holofleet._tcp.local.    SRV  and TXT "id=<id>" "version=<fw>" "api=1"
//	_services._dns-sd._udp.local.    PTR  _http._tcp.local., _holofleet._tcp.local.
//
// A PTR answer carries the instance's SRV, TXT and A records too, so one
// query resolves a board. Names are matched without regard to case.
package mdns

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	hmdns "github.com/hashicorp/mdns"
	"github.com/miekg/dns"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// Service types the board announces (the holofleet one is
// boardapi.MDNSService, the contract the gateway browses for).
const (
	ServiceHTTP  = "_http._tcp"
	servicesMeta = "_services._dns-sd._udp.local."
	domain       = "local."
)

// TTLs of the records, in seconds (RFC 6762 section 10).
const (
	HostTTL  = 120
	OtherTTL = 4500
)

// MulticastAddr is where mDNS messages go.
var MulticastAddr = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}

// Errors of the package.
var (
	// ErrNoAddress means there is no IPv4 address to announce.
	ErrNoAddress = errors.New("mdns: no IPv4 address to announce")
	// ErrStart means the responder could not listen for queries.
	ErrStart = errors.New("mdns: responder cannot listen")
)

// Zone is what the board announces; it answers questions from its
// current host, address and port, so a change is answered at once.
type Zone struct {
	// ID and Version go in the _holofleet._tcp TXT record.
	ID      string
	Version string

	mu   sync.RWMutex
	host string
	ip   net.IP
	port int
}

// Set changes what is announced.
func (z *Zone) Set(host string, ip net.IP, port int) error {
	ip4 := ip.To4()
	if ip4 == nil {
		return ErrNoAddress
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.host, z.ip, z.port = strings.ToLower(host), ip4, port
	return nil
}

// HostName is the announced fully qualified host name ("" before Set).
func (z *Zone) HostName() string {
	z.mu.RLock()
	defer z.mu.RUnlock()
	if z.host == "" {
		return ""
	}
	return z.host + "." + domain
}

func instance(host, service string) string { return host + "." + service + "." + domain }

// Records implements hashicorp/mdns's Zone: the answers to q.
func (z *Zone) Records(q dns.Question) []dns.RR {
	z.mu.RLock()
	host, ip, port := z.host, z.ip, z.port
	z.mu.RUnlock()
	if host == "" {
		return nil
	}
	name := strings.ToLower(q.Name)
	want := func(t uint16) bool { return q.Qtype == t || q.Qtype == dns.TypeANY }
	hostName := host + "." + domain
	a := func() dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: hostName, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: HostTTL}, A: ip}
	}
	srv := func(service string) dns.RR {
		return &dns.SRV{Hdr: dns.RR_Header{Name: instance(host, service), Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: HostTTL},
			Port: uint16(port), Target: hostName}
	}
	txt := func(service string) dns.RR {
		return &dns.TXT{Hdr: dns.RR_Header{Name: instance(host, service), Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: OtherTTL},
			Txt: z.txt(service)}
	}
	ptr := func(service string) dns.RR {
		return &dns.PTR{Hdr: dns.RR_Header{Name: service + "." + domain, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: OtherTTL},
			Ptr: instance(host, service)}
	}
	var out []dns.RR
	switch name {
	case hostName:
		if want(dns.TypeA) {
			out = append(out, a())
		}
	case servicesMeta:
		if want(dns.TypePTR) {
			for _, s := range []string{ServiceHTTP, boardapi.MDNSService} {
				out = append(out, &dns.PTR{Hdr: dns.RR_Header{Name: servicesMeta, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: OtherTTL},
					Ptr: s + "." + domain})
			}
		}
	default:
		for _, s := range []string{ServiceHTTP, boardapi.MDNSService} {
			switch name {
			case s + "." + domain:
				if want(dns.TypePTR) {
					out = append(out, ptr(s), srv(s), txt(s), a())
				}
			case instance(host, s):
				if want(dns.TypeSRV) {
					out = append(out, srv(s))
				}
				if want(dns.TypeTXT) {
					out = append(out, txt(s))
				}
				if q.Qtype == dns.TypeSRV || q.Qtype == dns.TypeANY {
					out = append(out, a())
				}
			}
		}
	}
	return out
}

func (z *Zone) txt(service string) []string {
	if service == boardapi.MDNSService {
		return []string{boardapi.MDNSTxtID + "=" + z.ID, boardapi.MDNSTxtVersion + "=" + z.Version, boardapi.MDNSTxtAPI + "=1"}
	}
	return []string{"path=/api/v1"}
}

// Announcement is the unsolicited response that tells the LAN about the
// board (ttl0: the goodbye that withdraws it).
func (z *Zone) Announcement(goodbye bool) *dns.Msg {
	m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}, Compress: true}
	z.mu.RLock()
	host := z.host
	z.mu.RUnlock()
	if host == "" {
		return m
	}
	m.Answer = append(m.Answer, z.Records(dns.Question{Name: host + "." + domain, Qtype: dns.TypeA, Qclass: dns.ClassINET})...)
	for _, s := range []string{ServiceHTTP, boardapi.MDNSService} {
		m.Answer = append(m.Answer, z.Records(dns.Question{Name: s + "." + domain, Qtype: dns.TypePTR, Qclass: dns.ClassINET})[:3]...)
	}
	if goodbye {
		for _, rr := range m.Answer {
			rr.Header().Ttl = 0
		}
	}
	return m
}

// Responder answers mDNS queries for a Zone while announced and sends an
// announcement on every change (network.Announcer). The zero value with
// Zone set is ready.
type Responder struct {
	Zone *Zone
	Log  *slog.Logger
	// Listen starts answering queries for the zone; nil uses
	// hashicorp/mdns on the system's multicast interface.
	Listen func(z *Zone) (stop func(), err error)
	// Send sends an unsolicited message; nil sends it to MulticastAddr.
	Send func(packet []byte) error

	mu   sync.Mutex
	stop func()
}

// Announce starts answering for host at ip:port, or updates it, and
// announces it.
func (r *Responder) Announce(host string, ip net.IP, port int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.Zone.Set(host, ip, port); err != nil {
		return err
	}
	if r.stop == nil {
		listen := r.Listen
		if listen == nil {
			listen = r.listen
		}
		stop, err := listen(r.Zone)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStart, err)
		}
		r.stop = stop
	}
	r.send(r.Zone.Announcement(false))
	return nil
}

// Withdraw says goodbye and stops answering.
func (r *Responder) Withdraw() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop == nil {
		return
	}
	r.send(r.Zone.Announcement(true))
	r.stop()
	r.stop = nil
}

func (r *Responder) listen(z *Zone) (func(), error) {
	cfg := &hmdns.Config{Zone: z}
	if r.Log != nil {
		cfg.Logger = slog.NewLogLogger(r.Log.Handler(), slog.LevelDebug)
	}
	srv, err := hmdns.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	return func() { _ = srv.Shutdown() }, nil
}

func (r *Responder) send(m *dns.Msg) {
	b, err := m.Pack()
	if err != nil {
		r.logf("mDNS announcement does not pack", err)
		return
	}
	send := r.Send
	if send == nil {
		send = sendMulticast
	}
	if err := send(b); err != nil {
		r.logf("mDNS announcement not sent", err)
	}
}

func (r *Responder) logf(msg string, err error) {
	if r.Log != nil {
		r.Log.Warn(msg, "err", err)
	}
}

func sendMulticast(b []byte) error {
	c, err := net.DialUDP("udp4", nil, MulticastAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write(b)
	return err
}
