package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The node's resolver (Options.ClusterDNS). A real cluster's DNS forwards
// names outside the cluster to the resolver its node was given; here the
// pods route only to the node's bridge and the Service range, so the node
// serves a resolver of its own on its bridge address, port 53, and names it
// in the resolv.conf the kubelet hands to pods with dnsPolicy Default (the
// cluster DNS's own pods). It answers the stand-in names (StandIn) itself
// and forwards every other question to the machine's resolvers.
const (
	// resolverPort is where the node's resolver listens on the bridge.
	resolverPort = 53
	// resolverTimeout bounds one exchange with an upstream resolver and
	// one read or write of a client.
	resolverTimeout = 3 * time.Second
	// standInTTL is the TTL of a stand-in's answer.
	standInTTL = 5
	// hostResolvConf is where the machine's resolvers are read from.
	hostResolvConf = "/etc/resolv.conf"
)

// StandInPrefix is the range stand-in addresses come from: the AS112
// direct delegation prefix (RFC 7534). The egress proxy refuses to dial any
// special-use range (D-32), so an institution's stand-in needs an ordinary
// public unicast address; this one is globally reachable by the IANA
// registry, yet no institution can live there: it holds only sinks for
// stray reverse lookups. The node adds stand-in addresses to its bridge
// while it runs, so for that time the machine reaches its own stand-in at
// such an address instead of the anycast sink.
var StandInPrefix = netip.MustParsePrefix("192.175.48.0/24")

// standInFirst is the first address StandIn hands out: the sinks RFC 7534
// names sit at .1, .6 and .42, below it.
const standInFirst = 100

// nodeResolver is the node's resolver: a UDP and a TCP server on the
// bridge address.
type nodeResolver struct {
	servers   []*dns.Server
	upstreams []string // host:port of the machine's resolvers

	mu    sync.Mutex
	names map[string]netip.Addr // fully qualified, lower case
}

// startResolver serves the node's resolver on addr (host:port) for UDP and
// TCP, forwarding to the resolvers of resolvConf.
func startResolver(addr, resolvConf string) (*nodeResolver, error) {
	r := &nodeResolver{names: map[string]netip.Addr{}}
	if cfg, err := dns.ClientConfigFromFile(resolvConf); err == nil {
		for _, s := range cfg.Servers {
			r.upstreams = append(r.upstreams, net.JoinHostPort(s, cfg.Port))
		}
	}
	// No upstream is not an error: the machine may have no network, and
	// the stand-ins still answer; other names get SERVFAIL.
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("devcluster: the node's resolver: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = pc.Close()
		return nil, fmt.Errorf("devcluster: the node's resolver: %w", err)
	}
	handler := dns.HandlerFunc(r.serveDNS)
	r.servers = []*dns.Server{
		{PacketConn: pc, Handler: handler, ReadTimeout: resolverTimeout, WriteTimeout: resolverTimeout},
		{Listener: ln, Handler: handler, ReadTimeout: resolverTimeout, WriteTimeout: resolverTimeout, MaxTCPQueries: 16},
	}
	for _, s := range r.servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ActivateAndServe() }()
		<-started
	}
	return r, nil
}

// add makes the resolver answer name (a host name) with addr.
func (r *nodeResolver) add(name string, addr netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[dns.Fqdn(strings.ToLower(name))] = addr
}

// lookup returns the stand-in address of a fully qualified name.
func (r *nodeResolver) lookup(fqdn string) (netip.Addr, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.names[strings.ToLower(fqdn)]
	return a, ok
}

// close stops both servers.
func (r *nodeResolver) close() error {
	var errs []error
	for _, s := range r.servers {
		errs = append(errs, s.Shutdown())
	}
	return errors.Join(errs...)
}

// serveDNS answers one query: a stand-in name from the table (A for an IPv4
// stand-in, an empty answer for other types), anything else from the first
// upstream that answers, SERVFAIL when none does.
func (r *nodeResolver) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	defer func() { _ = w.Close() }()
	resp := r.answer(req, w.RemoteAddr().Network())
	_ = w.WriteMsg(resp)
}

// answer is serveDNS's reply to req, asked over network ("udp" or "tcp"),
// which is also how it asks upstream.
func (r *nodeResolver) answer(req *dns.Msg, network string) *dns.Msg {
	resp := new(dns.Msg)
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		return resp.SetRcode(req, dns.RcodeFormatError)
	}
	q := req.Question[0]
	if addr, ok := r.lookup(q.Name); ok {
		resp.SetReply(req)
		resp.Authoritative = true
		if q.Qtype == dns.TypeA && q.Qclass == dns.ClassINET && addr.Is4() {
			resp.Answer = append(resp.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: standInTTL},
				A:   addr.AsSlice(),
			})
		}
		return resp
	}
	c := &dns.Client{Net: network, Timeout: resolverTimeout}
	for _, up := range r.upstreams {
		ctx, cancel := context.WithTimeout(context.Background(), resolverTimeout)
		got, _, err := c.ExchangeContext(ctx, req, up)
		cancel()
		if err == nil && got != nil {
			return got
		}
	}
	return resp.SetRcode(req, dns.RcodeServerFailure)
}

// StandIn makes host name the node's stand-in for an outside server:
// it adds an address of StandInPrefix to the node's bridge, where a server
// of the caller's can listen and every pod can connect, and makes the
// node's resolver answer name with it, so the cluster DNS (which forwards
// outside names to that resolver) resolves name to it for the egress
// proxy's pods. It needs Options.ClusterDNS. Asking again for the same name
// returns the same address.
func (n *Node) StandIn(name string) (netip.Addr, error) {
	if n.resolver == nil {
		return netip.Addr{}, errors.New("devcluster: StandIn needs a real node with ClusterDNS")
	}
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return netip.Addr{}, fmt.Errorf("devcluster: stand-in name %q is not a host name", name)
	}
	n.standInMu.Lock()
	defer n.standInMu.Unlock()
	if a, ok := n.resolver.lookup(dns.Fqdn(strings.ToLower(name))); ok {
		return a, nil
	}
	addr, err := n.addStandInAddr()
	if err != nil {
		return netip.Addr{}, err
	}
	n.resolver.add(name, addr)
	return addr, nil
}

// StandInAddress adds an address of StandInPrefix to the real node's
// bridge, where a server of the caller's can listen and every pod can
// connect (pods route StandInPrefix to the bridge), without a name: for a
// node without the cluster DNS, whose egress proxy runs outside the node
// and resolves stand-in names with a resolver of the caller's. The
// address goes with the bridge when the node stops.
func (n *Node) StandInAddress() (netip.Addr, error) {
	n.standInMu.Lock()
	defer n.standInMu.Unlock()
	return n.addStandInAddr()
}

// addStandInAddr adds the next free address of StandInPrefix to the
// bridge; the caller holds standInMu.
func (n *Node) addStandInAddr() (netip.Addr, error) {
	b := StandInPrefix.Addr().As4()
	b[3] = byte(standInFirst + n.standIns)
	if int(b[3]) < standInFirst || n.standIns >= 250-standInFirst {
		return netip.Addr{}, errors.New("devcluster: no stand-in address left")
	}
	addr := netip.AddrFrom4(b)
	if _, err := run("ip", "addr", "add", addr.String()+"/32", "dev", n.net.bridge); err != nil {
		return netip.Addr{}, err
	}
	n.standIns++
	return addr, nil
}
