package devstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStandInRoutesReachEachStandIn resolves and dials both local stand-ins
// as the egress proxy does, through one resolver and one dialer: each name
// resolves to its own stand-in's IP, port 443 of that IP leads to the
// stand-in itself (a TLS handshake for its name, trusting only its CA,
// proves which server answered), and other names do not exist.
func TestStandInRoutesReachEachStandIn(t *testing.T) {
	nbp, err := StartFakeNBP("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nbp.Close)
	dav, err := StartFakeDAV("", filepath.Join(t.TempDir(), "dav"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dav.Close)
	resolver, dialer, err := standInRoutes(nbp.route(), dav.route())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for host, caPEM := range map[string][]byte{fakeNBPHost: nbp.CAPEM(), FakeDAVHost: dav.CAPEM()} {
		t.Run(host, func(t *testing.T) {
			addrs, err := resolver.LookupNetIP(ctx, "ip", strings.ToUpper(host)+".")
			if err != nil || len(addrs) != 1 {
				t.Fatalf("LookupNetIP(%s) = %v, %v", host, addrs, err)
			}
			conn, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(addrs[0], 443).String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(caPEM)
			tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: pool, MinVersion: tls.VersionTLS12})
			if err := tc.HandshakeContext(ctx); err != nil {
				t.Fatalf("TLS to %s through port 443 of %s: %v", host, addrs[0], err)
			}
		})
	}
	_, err = resolver.LookupNetIP(ctx, "ip", "example.com")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("LookupNetIP(example.com) = %v, want not found", err)
	}
	if nbp.route().listen.Addr() == dav.route().listen.Addr() {
		t.Errorf("both stand-ins listen on %s: port 443 cannot lead to both", nbp.route().listen.Addr())
	}
}

// TestStandInRoutesRefuse: two stand-ins on one IP, or one name twice,
// cannot be routed, and say why.
func TestStandInRoutesRefuse(t *testing.T) {
	a := standInRoute{host: "a.test", listen: netip.MustParseAddrPort("127.0.0.1:1001")}
	tests := map[string]struct {
		routes []standInRoute
		want   string
	}{
		"one IP for two stand-ins": {[]standInRoute{a, {host: "b.test", listen: netip.MustParseAddrPort("127.0.0.1:1002")}}, "each stand-in needs an IP of its own"},
		"one name twice":           {[]standInRoute{a, {host: "A.test.", listen: netip.MustParseAddrPort("127.0.0.2:1002")}}, "a.test is answered by two stand-ins"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, _, err := standInRoutes(tt.routes...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("standInRoutes = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
