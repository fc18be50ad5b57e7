package nettest

import (
	"net"
	"testing"
)

// DialUDP dials a UDP (IPv4) socket to addr, as a desk or an OSC sender
// would talk to a gateway's listener, and closes it when the test ends.
func DialUDP(t testing.TB, addr string) *net.UDPConn {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp4", nil, ua)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
