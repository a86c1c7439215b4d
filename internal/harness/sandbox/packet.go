package sandbox

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// maxQueryLen bounds a recorded DNS name (a name is at most 253 bytes in
// presentation form without escapes).
const maxQueryLen = 255

// packetAttempt reads one IP packet the sandbox's process sent to the trap
// and returns it as an Attempt, with a flow key that is the same for its
// retransmissions (so a SYN sent three times is one attempt). ok is false
// for what is not the process's attempt: malformed packets, fragments after
// the first, and the kernel's own IPv6 housekeeping (neighbour discovery,
// router solicitations, multicast listener reports) and IGMP.
func packetAttempt(b []byte) (a Attempt, flow string, ok bool) {
	if len(b) < 1 {
		return Attempt{}, "", false
	}
	var (
		proto    byte
		src, dst netip.Addr
		payload  []byte
	)
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return Attempt{}, "", false
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || ihl > len(b) {
			return Attempt{}, "", false
		}
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 { // not the first fragment
			return Attempt{}, "", false
		}
		proto = b[9]
		src = netip.AddrFrom4([4]byte(b[12:16]))
		dst = netip.AddrFrom4([4]byte(b[16:20]))
		payload = b[ihl:]
	case 6:
		if len(b) < 40 {
			return Attempt{}, "", false
		}
		src = netip.AddrFrom16([16]byte(b[8:24]))
		dst = netip.AddrFrom16([16]byte(b[24:40]))
		var good bool
		proto, payload, good = ipv6Payload(b[6], b[40:])
		if !good {
			return Attempt{}, "", false
		}
	default:
		return Attempt{}, "", false
	}
	key := string(proto) + "|" + src.String() + "|" + dst.String()
	switch proto {
	case 6, 17: // TCP, UDP
		if len(payload) < 8 {
			return Attempt{}, "", false
		}
		sport := binary.BigEndian.Uint16(payload[0:2])
		dport := binary.BigEndian.Uint16(payload[2:4])
		addr := netip.AddrPortFrom(dst, dport).String()
		key += "|" + strconv.Itoa(int(sport)) + "|" + strconv.Itoa(int(dport))
		if proto == 6 {
			return Attempt{Protocol: "tcp", Address: addr}, key, true
		}
		if dport == 53 {
			if q, id, isDNS := dnsQuestion(payload[8:]); isDNS {
				return Attempt{Protocol: "dns", Address: addr, Query: q}, key + "|" + strconv.Itoa(int(id)) + "|" + q, true
			}
		}
		return Attempt{Protocol: "udp", Address: addr}, key, true
	case 1, 58: // ICMP, ICMPv6
		if len(payload) < 8 {
			return Attempt{}, "", false
		}
		if proto == 58 && (payload[0] >= 130 && payload[0] <= 137 || payload[0] == 143) {
			return Attempt{}, "", false
		}
		// Echo requests of one identifier, or one other type, to one
		// address are one attempt.
		key += "|" + strconv.Itoa(int(payload[0])) + "|" + strconv.Itoa(int(binary.BigEndian.Uint16(payload[4:6])))
		return Attempt{Protocol: "icmp", Address: dst.String()}, key, true
	case 2: // IGMP: the kernel's
		return Attempt{}, "", false
	default:
		return Attempt{Protocol: "ip-" + strconv.Itoa(int(proto)), Address: dst.String()}, key, true
	}
}

// ipv6Payload skips an IPv6 packet's extension headers (at most 8) and
// returns the upper-layer protocol and its bytes; ok is false for a
// fragment after the first or a malformed chain.
func ipv6Payload(next byte, b []byte) (proto byte, payload []byte, ok bool) {
	for range 8 {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(b) < 8 {
				return 0, nil, false
			}
			n := (int(b[1]) + 1) * 8
			if n > len(b) {
				return 0, nil, false
			}
			next, b = b[0], b[n:]
		case 44: // fragment
			if len(b) < 8 || binary.BigEndian.Uint16(b[2:4])>>3 != 0 {
				return 0, nil, false
			}
			next, b = b[0], b[8:]
		case 51: // authentication header
			if len(b) < 8 {
				return 0, nil, false
			}
			n := (int(b[1]) + 2) * 4
			if n > len(b) {
				return 0, nil, false
			}
			next, b = b[0], b[n:]
		case 59: // no next header
			return 0, nil, false
		default:
			return next, b, true
		}
	}
	return 0, nil, false
}

// dnsQuestion reads a DNS query message and returns its first question's
// name, cleaned by cleanQuery, and its id; ok is false when msg is not a
// query with a question.
func dnsQuestion(msg []byte) (name string, id uint16, ok bool) {
	if len(msg) > 65535 {
		return "", 0, false
	}
	var m dns.Msg
	if err := m.Unpack(msg); err != nil || m.Response || len(m.Question) == 0 {
		return "", 0, false
	}
	return cleanQuery(m.Question[0].Name), m.Id, true
}

// cleanQuery makes a DNS name fit to print: lower case, without its final
// dot, printable ASCII (miekg/dns already escapes other bytes as \DDD),
// at most maxQueryLen bytes.
func cleanQuery(name string) string {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "" {
		name = "."
	}
	return printable(name, maxQueryLen)
}
