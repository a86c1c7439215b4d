package sandbox

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// readTrap records every packet the process sends out of the TUN link
// until the link is closed; nothing is ever written back.
func (s *Sandbox) readTrap() {
	defer s.readers.Done()
	buf := make([]byte, 65536)
	for {
		n, err := s.tun.Read(buf)
		if err != nil {
			return
		}
		if a, flow, ok := packetAttempt(buf[:n]); ok {
			s.record(a, flow)
		}
	}
}

// dnsAddresses are the loopback addresses a resolver may be told to ask.
var dnsAddresses = []string{"127.0.0.1", "127.0.0.53", "::1"}

// listenDNS opens UDP and TCP port 53 on the loopback addresses, in the
// calling thread's network namespace. Every query is recorded and answered
// REFUSED.
func (s *Sandbox) listenDNS(ipv6 bool) error {
	for _, host := range dnsAddresses {
		if host == "::1" && !ipv6 {
			continue
		}
		addr := net.JoinHostPort(host, "53")
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		s.servers = append(s.servers, pc)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		s.servers = append(s.servers, l)
		s.readers.Add(2)
		go s.serveDNSUDP(pc, addr)
		go s.serveDNSTCP(l, addr)
	}
	return nil
}

// dnsQuery records one query message received on addr and returns the
// REFUSED answer (nil when msg is not a query).
func (s *Sandbox) dnsQuery(msg []byte, addr, from string) []byte {
	var m dns.Msg
	if err := m.Unpack(msg); err != nil || m.Response || len(m.Question) == 0 {
		s.record(Attempt{Protocol: "dns", Address: addr}, "dns|"+addr+"|"+from+"|junk")
		return nil
	}
	q := cleanQuery(m.Question[0].Name)
	s.record(Attempt{Protocol: "dns", Address: addr, Query: q}, "dns|"+addr+"|"+from+"|"+strconv.Itoa(int(m.Id))+"|"+q)
	var r dns.Msg
	r.SetRcode(&m, dns.RcodeRefused)
	out, err := r.Pack()
	if err != nil {
		return nil
	}
	return out
}

func (s *Sandbox) serveDNSUDP(pc net.PacketConn, addr string) {
	defer s.readers.Done()
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := s.dnsQuery(buf[:n], addr, "udp "+from.String()); out != nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// maxDNSConns bounds the TCP DNS connections served at once; more are
// closed at once.
const maxDNSConns = 32

func (s *Sandbox) serveDNSTCP(l net.Listener, addr string) {
	defer s.readers.Done()
	slots := make(chan struct{}, maxDNSConns)
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = c.Close()
			continue
		}
		if !s.trackConn(c) {
			_ = c.Close()
			<-slots
			return
		}
		go func() {
			defer func() { <-slots }()
			defer s.untrackConn(c) // closes it
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			from := "tcp " + c.RemoteAddr().String()
			for range 16 {
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				msg := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, msg); err != nil {
					return
				}
				out := s.dnsQuery(msg, addr, from)
				if out == nil {
					return
				}
				if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(out)))); err != nil {
					return
				}
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
}

// trackConn keeps a DNS client connection for Close; false once closing.
func (s *Sandbox) trackConn(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = true
	return true
}

// untrackConn closes a DNS client connection and forgets it.
func (s *Sandbox) untrackConn(c net.Conn) {
	_ = c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}
