package sandbox

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// ipPacket builds an IP packet with the upper-layer payload.
func ipPacket(src, dst string, proto byte, payload []byte) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	if s.Is4() {
		h := make([]byte, 20)
		h[0], h[9] = 0x45, proto
		binary.BigEndian.PutUint16(h[2:4], uint16(20+len(payload)))
		copy(h[12:16], s.AsSlice())
		copy(h[16:20], d.AsSlice())
		return append(h, payload...)
	}
	h := make([]byte, 40)
	h[0], h[6] = 0x60, proto
	binary.BigEndian.PutUint16(h[4:6], uint16(len(payload)))
	copy(h[8:24], s.AsSlice())
	copy(h[24:40], d.AsSlice())
	return append(h, payload...)
}

func ports(sport, dport uint16, rest ...byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = append(b, make([]byte, 16)...)
	return append(b, rest...)
}

func dnsQuery(t testing.TB, name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	udp := binary.BigEndian.AppendUint16(nil, 40000)
	udp = binary.BigEndian.AppendUint16(udp, 53)
	udp = append(udp, 0, 0, 0, 0)
	return append(udp, b...)
}

func TestPacketAttempt(t *testing.T) {
	frag := ipPacket("198.18.0.1", "203.0.113.7", 6, ports(1, 443))
	binary.BigEndian.PutUint16(frag[6:8], 10) // a later fragment
	for name, tc := range map[string]struct {
		pkt  []byte
		want Attempt
		ok   bool
	}{
		"tcp4":            {ipPacket("198.18.0.1", "203.0.113.7", 6, ports(40000, 443)), Attempt{Protocol: "tcp", Address: "203.0.113.7:443"}, true},
		"tcp6":            {ipPacket("fd6f:6600::1", "2001:db8::1", 6, ports(40000, 443)), Attempt{Protocol: "tcp", Address: "[2001:db8::1]:443"}, true},
		"udp":             {ipPacket("198.18.0.1", "203.0.113.8", 17, ports(40000, 9999)), Attempt{Protocol: "udp", Address: "203.0.113.8:9999"}, true},
		"dns":             {ipPacket("198.18.0.1", "192.0.2.53", 17, dnsQuery(t, "Example.COM.")), Attempt{Protocol: "dns", Address: "192.0.2.53:53", Query: "example.com"}, true},
		"dns hostile":     {ipPacket("198.18.0.1", "192.0.2.53", 17, dnsQuery(t, "a\\027[31m\\010.evil.")), Attempt{Protocol: "dns", Address: "192.0.2.53:53", Query: "a\\027[31m\\010.evil"}, true},
		"udp 53 not dns":  {ipPacket("198.18.0.1", "192.0.2.53", 17, ports(1, 53, 0xff)), Attempt{Protocol: "udp", Address: "192.0.2.53:53"}, true},
		"icmp echo":       {ipPacket("198.18.0.1", "203.0.113.9", 1, []byte{8, 0, 0, 0, 0, 1, 0, 1}), Attempt{Protocol: "icmp", Address: "203.0.113.9"}, true},
		"icmp6 echo":      {ipPacket("fd6f:6600::1", "2001:db8::9", 58, []byte{128, 0, 0, 0, 0, 1, 0, 1}), Attempt{Protocol: "icmp", Address: "2001:db8::9"}, true},
		"neighbour sol.":  {ipPacket("fe80::1", "ff02::1:ff00:1", 58, []byte{135, 0, 0, 0, 0, 0, 0, 0}), Attempt{}, false},
		"mld report":      {ipPacket("fe80::1", "ff02::16", 58, []byte{143, 0, 0, 0, 0, 0, 0, 0}), Attempt{}, false},
		"igmp":            {ipPacket("198.18.0.1", "224.0.0.22", 2, make([]byte, 8)), Attempt{}, false},
		"later fragment":  {frag, Attempt{}, false},
		"short":           {[]byte{0x45, 0}, Attempt{}, false},
		"short tcp":       {ipPacket("198.18.0.1", "203.0.113.7", 6, []byte{1, 2}), Attempt{}, false},
		"version 5":       {[]byte{0x50, 0, 0, 0}, Attempt{}, false},
		"other protocol":  {ipPacket("198.18.0.1", "203.0.113.7", 132, ports(1, 2)), Attempt{Protocol: "ip-132", Address: "203.0.113.7"}, true},
		"ipv6 hop-by-hop": {ipPacket("fd6f:6600::1", "2001:db8::1", 0, append([]byte{6, 0, 0, 0, 0, 0, 0, 0}, ports(1, 80)...)), Attempt{Protocol: "tcp", Address: "[2001:db8::1]:80"}, true},
		"ipv6 no next":    {ipPacket("fd6f:6600::1", "2001:db8::1", 59, nil), Attempt{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, flow, ok := packetAttempt(tc.pkt)
			if ok != tc.ok || got != tc.want {
				t.Errorf("packetAttempt = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if ok && flow == "" {
				t.Error("no flow key")
			}
		})
	}
	// Retransmissions share a flow; another source port does not.
	_, f1, _ := packetAttempt(ipPacket("198.18.0.1", "203.0.113.7", 6, ports(40000, 443)))
	_, f2, _ := packetAttempt(ipPacket("198.18.0.1", "203.0.113.7", 6, ports(40000, 443)))
	_, f3, _ := packetAttempt(ipPacket("198.18.0.1", "203.0.113.7", 6, ports(40001, 443)))
	if f1 != f2 || f1 == f3 {
		t.Errorf("flows %q %q %q", f1, f2, f3)
	}
}

func FuzzPacketAttempt(f *testing.F) {
	f.Add(ipPacket("198.18.0.1", "203.0.113.7", 6, ports(40000, 443)))
	f.Add(ipPacket("fd6f:6600::1", "2001:db8::1", 43, append([]byte{17, 0, 0, 0, 0, 0, 0, 0}, dnsQuery(f, "x.example.")...)))
	f.Add(ipPacket("198.18.0.1", "192.0.2.53", 17, dnsQuery(f, "example.com.")))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		a, flow, ok := packetAttempt(pkt)
		if !ok {
			return
		}
		if a.Protocol == "" || a.Address == "" || flow == "" {
			t.Fatalf("attempt %+v flow %q", a, flow)
		}
		if len(a.Query) > maxQueryLen || printable(a.Query, maxQueryLen) != a.Query {
			t.Fatalf("query %q is not clean", a.Query)
		}
		if a.Query != "" && a.Protocol != "dns" {
			t.Fatalf("attempt %+v", a)
		}
	})
}

func FuzzDNSQuestion(f *testing.F) {
	f.Add(dnsQuery(f, "example.com.")[8:])
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', 0x1b, 'b', 0, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, msg []byte) {
		q, _, ok := dnsQuestion(msg)
		if !ok {
			return
		}
		if q == "" || len(q) > maxQueryLen || printable(q, maxQueryLen) != q || strings.ContainsAny(q, "\x1b\n\r") {
			t.Fatalf("query %q is not clean", q)
		}
	})
}
