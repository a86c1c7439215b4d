package egress

import (
	"net/netip"
)

// namedPrefix is a range of addresses the proxy never dials, with the name
// its refusal reports.
type namedPrefix struct {
	prefix netip.Prefix
	name   string
}

func mustPrefixes(pairs ...string) []namedPrefix {
	out := make([]namedPrefix, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, namedPrefix{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// blockedV4 holds every IPv4 range that is not ordinary public unicast: the
// cluster's own networks, the node and cloud metadata (169.254.169.254 and
// Azure's 168.63.129.16), and
// ranges with no business being an institution's address (IANA special-purpose
// registry, RFC 6890 and successors).
var blockedV4 = mustPrefixes(
	"0.0.0.0/8", "this network (unspecified)",
	"10.0.0.0/8", "private (RFC 1918)",
	"100.64.0.0/10", "carrier-grade NAT (RFC 6598)",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local (cloud metadata)",
	"172.16.0.0/12", "private (RFC 1918)",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation",
	"192.88.99.0/24", "6to4 relay anycast",
	"192.168.0.0/16", "private (RFC 1918)",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation",
	"203.0.113.0/24", "documentation",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved (incl. broadcast)",
	// Public addresses that are a cloud platform's host endpoints, reachable
	// from every virtual machine there: Azure's wire server (DHCP, health,
	// VM agent, and through it the VM's extensions and their settings).
	"168.63.129.16/32", "cloud host endpoint (Azure wire server)",
)

// blockedV6 holds IPv6 ranges refused by name; everything outside global
// unicast 2000::/3 is refused as well (see addressPolicy.check).
var blockedV6 = mustPrefixes(
	"::/128", "unspecified",
	"::1/128", "loopback",
	"::/96", "IPv4-compatible (deprecated)",
	"64:ff9b:1::/48", "local-use NAT64",
	"100::/64", "discard-only",
	"2001::/32", "Teredo",
	"2001:2::/48", "benchmarking",
	"2001:10::/28", "ORCHID",
	"2001:20::/28", "ORCHIDv2",
	"2001:db8::/32", "documentation",
	"3fff::/20", "documentation",
	"5f00::/16", "SRv6 SIDs",
	"fc00::/7", "unique local",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local (deprecated)",
	"ff00::/8", "multicast",
)

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// addressPolicy decides which resolved addresses the proxy may dial (D-32).
// allow is empty in production; tests put 127.0.0.0/8 in it so a loopback
// server can stand in for an institution.
type addressPolicy struct {
	allow []netip.Prefix
}

// check returns the address to dial (IPv4-mapped forms unmapped) and "" when
// a may be dialled, or the name of the range that refuses it. IPv6 addresses
// that embed an IPv4 address (NAT64 64:ff9b::/96, 6to4 2002::/16) are judged
// by the embedded address too.
func (p addressPolicy) check(a netip.Addr) (netip.Addr, string) {
	if !a.IsValid() {
		return a, "invalid address"
	}
	if a.Zone() != "" {
		return a, "scoped address"
	}
	a = a.Unmap()
	for _, pre := range p.allow {
		if pre.Contains(a) {
			return a, ""
		}
	}
	if a.Is4() {
		return a, blockedRange(blockedV4, a)
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		if r := blockedRange(blockedV4, netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return a, "NAT64 of " + r
		}
		return a, ""
	case sixToFour.Contains(a):
		if r := blockedRange(blockedV4, netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return a, "6to4 of " + r
		}
	}
	if r := blockedRange(blockedV6, a); r != "" {
		return a, r
	}
	if !globalUnicast6.Contains(a) {
		return a, "not global unicast"
	}
	return a, ""
}

func blockedRange(ranges []namedPrefix, a netip.Addr) string {
	for _, r := range ranges {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	return ""
}
