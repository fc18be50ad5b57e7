package mdns

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func zone(t testing.TB) *Zone {
	z := &Zone{ID: "0a1b2c3d4e5f", Version: "1.2.3"}
	if err := z.Set("Holo-ABCD", net.IPv4(127, 0, 0, 1), 8080); err != nil {
		t.Fatal(err)
	}
	return z
}

func strs(rrs []dns.RR) []string {
	out := []string{}
	for _, rr := range rrs {
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	return out
}

func TestRecords(t *testing.T) {
	a := "holo-abcd.local. 120 IN A 127.0.0.1"
	httpPTR := "_http._tcp.local. 4500 IN PTR holo-abcd._http._tcp.local."
	httpSRV := "holo-abcd._http._tcp.local. 120 IN SRV 0 0 8080 holo-abcd.local."
	httpTXT := `holo-abcd._http._tcp.local. 4500 IN TXT "path=/api/v1"`
	hfPTR := "_holofleet._tcp.local. 4500 IN PTR holo-abcd._holofleet._tcp.local."
	hfSRV := "holo-abcd._holofleet._tcp.local. 120 IN SRV 0 0 8080 holo-abcd.local."
	hfTXT := `holo-abcd._holofleet._tcp.local. 4500 IN TXT "id=0a1b2c3d4e5f" "version=1.2.3" "api=1"`
	tests := []struct {
		name  string
		qname string
		qtype uint16
		want  []string
	}{
		{"host A", "holo-abcd.local.", dns.TypeA, []string{a}},
		{"host A any case", "HOLO-abcd.Local.", dns.TypeA, []string{a}},
		{"host ANY", "holo-abcd.local.", dns.TypeANY, []string{a}},
		{"host AAAA", "holo-abcd.local.", dns.TypeAAAA, []string{}},
		{"other host", "holo-ffff.local.", dns.TypeA, []string{}},
		{"http browse", "_http._tcp.local.", dns.TypePTR, []string{httpPTR, httpSRV, httpTXT, a}},
		{"holofleet browse", "_holofleet._tcp.local.", dns.TypePTR, []string{hfPTR, hfSRV, hfTXT, a}},
		{"http SRV", "holo-abcd._http._tcp.local.", dns.TypeSRV, []string{httpSRV, a}},
		{"http TXT", "holo-abcd._http._tcp.local.", dns.TypeTXT, []string{httpTXT}},
		{"holofleet ANY", "holo-abcd._holofleet._tcp.local.", dns.TypeANY, []string{hfSRV, hfTXT, a}},
		{"service types", "_services._dns-sd._udp.local.", dns.TypePTR, []string{
			"_services._dns-sd._udp.local. 4500 IN PTR _http._tcp.local.",
			"_services._dns-sd._udp.local. 4500 IN PTR _holofleet._tcp.local."}},
		{"other service", "_ipp._tcp.local.", dns.TypePTR, []string{}},
		{"not local", "holo-abcd.", dns.TypeA, []string{}},
	}
	z := zone(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strs(z.Records(dns.Question{Name: tt.qname, Qtype: tt.qtype, Qclass: dns.ClassINET}))
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

func TestZoneFollowsChanges(t *testing.T) {
	z := &Zone{}
	if got := z.Records(dns.Question{Name: "holo-abcd.local.", Qtype: dns.TypeA}); got != nil {
		t.Fatalf("empty zone answers: %v", got)
	}
	if err := z.Set("holo-abcd", net.ParseIP("::1"), 80); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("IPv6 only: %v", err)
	}
	_ = z.Set("holo-abcd", net.IPv4(10, 0, 0, 7), 80)
	_ = z.Set("stage-left", net.IPv4(10, 0, 0, 8), 80)
	if got := z.Records(dns.Question{Name: "holo-abcd.local.", Qtype: dns.TypeA}); len(got) != 0 {
		t.Errorf("old name still answered: %v", got)
	}
	got := strs(z.Records(dns.Question{Name: "stage-left.local.", Qtype: dns.TypeA}))
	if diff := cmp.Diff(got, []string{"stage-left.local. 120 IN A 10.0.0.8"}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestAnnouncementPacks checks the unsolicited response and its goodbye
// survive packing and unpacking as a real mDNS message.
func TestAnnouncementPacks(t *testing.T) {
	z := zone(t)
	for _, goodbye := range []bool{false, true} {
		b, err := z.Announcement(goodbye).Pack()
		if err != nil {
			t.Fatal(err)
		}
		var m dns.Msg
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		if !m.Response || !m.Authoritative || len(m.Question) != 0 || len(m.Answer) != 7 {
			t.Fatalf("announcement: %v", m.String())
		}
		for _, rr := range m.Answer {
			if (rr.Header().Ttl == 0) != goodbye {
				t.Errorf("goodbye=%v: %s", goodbye, rr)
			}
		}
	}
}

func TestResponder(t *testing.T) {
	var mu sync.Mutex
	var log []string
	add := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	r := &Responder{Zone: &Zone{ID: "id", Version: "v"},
		Listen: func(z *Zone) (func(), error) { add("listen"); return func() { add("stop") }, nil },
		Send: func(b []byte) error {
			var m dns.Msg
			if err := m.Unpack(b); err != nil {
				return err
			}
			add(m.Answer[0].String()[:strings.Index(m.Answer[0].String(), "\t")] + " ttl " + map[bool]string{true: "0", false: "120"}[m.Answer[0].Header().Ttl == 0])
			return nil
		}}
	if err := r.Announce("holo-abcd", net.IPv4(127, 0, 0, 1), 80); err != nil {
		t.Fatal(err)
	}
	if err := r.Announce("stage-left", net.IPv4(127, 0, 0, 1), 80); err != nil {
		t.Fatal(err)
	}
	r.Withdraw()
	r.Withdraw()
	want := []string{"listen", "holo-abcd.local. ttl 120", "stage-left.local. ttl 120", "stage-left.local. ttl 0", "stop"}
	if diff := cmp.Diff(log, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	bad := &Responder{Zone: &Zone{}, Listen: func(*Zone) (func(), error) { return nil, errors.New("no multicast") }}
	if err := bad.Announce("h", net.IPv4(127, 0, 0, 1), 80); !errors.Is(err, ErrStart) {
		t.Errorf("listen failure: %v", err)
	}
}

// FuzzRecords asks the zone arbitrary questions: it never panics and every
// answer packs into a message.
func FuzzRecords(f *testing.F) {
	f.Add("holo-abcd.local.", uint16(dns.TypeA))
	f.Add("_http._tcp.local.", uint16(dns.TypePTR))
	f.Add("holo-abcd._holofleet._tcp.local.", uint16(dns.TypeANY))
	f.Add("_services._dns-sd._udp.local.", uint16(dns.TypePTR))
	z := zone(f)
	f.Fuzz(func(t *testing.T, name string, qtype uint16) {
		rrs := z.Records(dns.Question{Name: name, Qtype: qtype, Qclass: dns.ClassINET})
		m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Answer: rrs}
		if _, err := m.Pack(); err != nil {
			t.Fatalf("%q %d: %v", name, qtype, err)
		}
	})
}

func BenchmarkRecordsPTR(b *testing.B) {
	z := zone(b)
	q := dns.Question{Name: "_http._tcp.local.", Qtype: dns.TypePTR, Qclass: dns.ClassINET}
	b.ReportAllocs()
	for b.Loop() {
		m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Answer: z.Records(q), Compress: true}
		if _, err := m.Pack(); err != nil {
			b.Fatal(err)
		}
	}
}
