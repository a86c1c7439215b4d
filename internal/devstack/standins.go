package devstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/arkadiuss/openfief/internal/egress"
)

// standInRoute is how the egress proxy reaches one stand-in: the name it
// answers to, and the address it listens on. The proxy resolves the name to
// that address's IP and, after its checks, connects port 443 of the IP to
// the address (the stand-in's port is a free one, not 443).
type standInRoute struct {
	host   string
	listen netip.AddrPort
}

// routeOf is the route to a stand-in listening on ln for host.
func routeOf(host string, ln net.Listener) standInRoute {
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	return standInRoute{host: host, listen: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
}

// standInRoutes builds the proxy's resolver and dialer for several
// stand-ins at once (api.nbp.pl and dav.openfief.test in the local mode).
// Two stand-ins on one IP are refused: port 443 of that IP could lead to
// one of them only, so each needs an address of its own (FakeDAV listens
// on 127.0.0.2 for that reason). So is a name given twice.
func standInRoutes(routes ...standInRoute) (fixedResolver, redirectDialer, error) {
	res, dial := fixedResolver{}, redirectDialer{}
	for _, r := range routes {
		name := strings.TrimSuffix(strings.ToLower(r.host), ".")
		if _, ok := res[name]; ok {
			return nil, nil, fmt.Errorf("stand-ins: %s is answered by two stand-ins", name)
		}
		from := netip.AddrPortFrom(r.listen.Addr(), 443).String()
		if to, ok := dial[from]; ok {
			return nil, nil, fmt.Errorf("stand-ins: %s listens on %s, and %s already leads to %s: each stand-in needs an IP of its own", name, r.listen, from, to)
		}
		res[name] = r.listen.Addr()
		dial[from] = r.listen.String()
	}
	return res, dial, nil
}

// fixedResolver answers lookups from a table; other names do not exist.
type fixedResolver map[string]netip.Addr

func (r fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[strings.TrimSuffix(strings.ToLower(host), ".")]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// redirectDialer connects the addresses it maps elsewhere, and any other
// address as it is.
type redirectDialer map[string]string

func (d redirectDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if to, ok := d[address]; ok {
		address = to
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// LoopbackPrefixes is the range the proxy must be told to allow for the
// loopback stand-ins (egress.Options.UnsafeAllowPrefixes): loopback only.
func LoopbackPrefixes() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }

// Compile-time checks that the routes fit the proxy's options.
var (
	_ egress.Resolver = fixedResolver{}
	_ egress.Dialer   = redirectDialer{}
)
