package node

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"
)

// TestNodeResolver serves the node's resolver on loopback, with an upstream
// resolver of the test's own (a real DNS server on loopback), and asks it
// over UDP and TCP: a stand-in name is answered from its table whatever the
// case, another name is forwarded upstream, a name the upstream refuses
// comes back refused, and with no upstream left it answers SERVFAIL.
func TestNodeResolver(t *testing.T) {
	upAddr := serveUpstream(t)
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	host, port, _ := net.SplitHostPort(upAddr)
	if err := os.WriteFile(conf, []byte("nameserver "+host+"\noptions ndots:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// dns.ClientConfigFromFile has one port for every server: write the
	// upstream's port through the resolver's own field after reading.
	addr := freeUDPTCPPort(t)
	r, err := startResolver(addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.close() })
	if len(r.upstreams) != 1 || r.upstreams[0] != net.JoinHostPort(host, "53") {
		t.Fatalf("upstreams read from %s: %v", conf, r.upstreams)
	}
	r.upstreams = []string{net.JoinHostPort(host, port)}
	r.add("API.nbp.pl", netip.MustParseAddr("192.175.48.100"))

	for _, network := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: network}
		ask := func(name string, qtype uint16) *dns.Msg {
			t.Helper()
			m := new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype)
			resp, _, err := c.Exchange(m, addr)
			if err != nil {
				t.Fatalf("%s %s: %v", network, name, err)
			}
			return resp
		}
		if got := ask("api.NBP.pl", dns.TypeA); got.Rcode != dns.RcodeSuccess || len(got.Answer) != 1 || got.Answer[0].(*dns.A).A.String() != "192.175.48.100" {
			t.Errorf("%s: the stand-in: %v", network, got)
		}
		if got := ask("api.nbp.pl", dns.TypeAAAA); got.Rcode != dns.RcodeSuccess || len(got.Answer) != 0 {
			t.Errorf("%s: the stand-in's AAAA: %v, want no answer and no error", network, got)
		}
		if got := ask("upstream.test", dns.TypeA); got.Rcode != dns.RcodeSuccess || len(got.Answer) != 1 || got.Answer[0].(*dns.A).A.String() != "198.51.100.7" {
			t.Errorf("%s: a forwarded name: %v", network, got)
		}
		if got := ask("refused.test", dns.TypeA); got.Rcode != dns.RcodeRefused {
			t.Errorf("%s: a name the upstream refuses: rcode %s", network, dns.RcodeToString[got.Rcode])
		}
	}

	r.upstreams = nil
	if got := r.answer(new(dns.Msg).SetQuestion("upstream.test.", dns.TypeA), "udp"); got.Rcode != dns.RcodeServerFailure {
		t.Errorf("with no upstream: rcode %s, want SERVFAIL", dns.RcodeToString[got.Rcode])
	}
	two := new(dns.Msg).SetQuestion("a.test.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "b.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if got := r.answer(two, "udp"); got.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: rcode %s, want FORMERR", dns.RcodeToString[got.Rcode])
	}
}

// serveUpstream serves a DNS server on loopback UDP and TCP (one port) that
// answers upstream.test with 198.51.100.7 and refuses everything else.
func serveUpstream(t *testing.T) string {
	t.Helper()
	addr := freeUDPTCPPort(t)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		if req.Question[0].Name == "upstream.test." {
			resp.SetReply(req)
			resp.Answer = append(resp.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: "upstream.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   net.ParseIP("198.51.100.7"),
			})
		} else {
			resp.SetRcode(req, dns.RcodeRefused)
		}
		_ = w.WriteMsg(resp)
	})
	for _, network := range []string{"udp", "tcp"} {
		started := make(chan struct{})
		s := &dns.Server{Addr: addr, Net: network, Handler: h, NotifyStartedFunc: func() { close(started) }}
		go func() { _ = s.ListenAndServe() }()
		<-started
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return addr
}

// freeUDPTCPPort returns a 127.0.0.1 address whose port is free for both
// UDP and TCP.
func freeUDPTCPPort(t *testing.T) string {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := pc.LocalAddr().String()
		ln, err := net.Listen("tcp", addr)
		_ = pc.Close()
		if err == nil {
			_ = ln.Close()
			return addr
		}
	}
	t.Fatal("no port free for both UDP and TCP on 127.0.0.1")
	return ""
}
