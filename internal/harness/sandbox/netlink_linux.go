package sandbox

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rtnl is a route netlink socket of the calling thread's network
// namespace: the few messages the sandbox needs (an address, a default
// route) written with golang.org/x/sys/unix alone.
type rtnl struct {
	fd  int
	seq uint32
}

func openRtnl() (*rtnl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &rtnl{fd: fd}, nil
}

func (r *rtnl) close() { _ = unix.Close(r.fd) }

// attr appends one route attribute.
func attr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// do sends one request and waits for its acknowledgement.
func (r *rtnl) do(typ, flags uint16, body []byte) error {
	r.seq++
	msg := make([]byte, 0, unix.SizeofNlMsghdr+len(body))
	msg = binary.NativeEndian.AppendUint32(msg, uint32(unix.SizeofNlMsghdr+len(body)))
	msg = binary.NativeEndian.AppendUint16(msg, typ)
	msg = binary.NativeEndian.AppendUint16(msg, unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	msg = binary.NativeEndian.AppendUint32(msg, r.seq)
	msg = binary.NativeEndian.AppendUint32(msg, 0)
	msg = append(msg, body...)
	if err := unix.Sendto(r.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != r.seq || m.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if len(m.Data) < 4 {
				return fmt.Errorf("netlink: short error message")
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
}

// addAddr gives the link index the address prefix (no duplicate address
// detection: nothing else is on the link).
func (r *rtnl) addAddr(index int, p netip.Prefix) error {
	fam := uint8(unix.AF_INET)
	if p.Addr().Is6() {
		fam = unix.AF_INET6
	}
	m := unix.IfAddrmsg{Family: fam, Prefixlen: uint8(p.Bits()), Flags: unix.IFA_F_NODAD | unix.IFA_F_PERMANENT, Index: uint32(index)}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&m)), unix.SizeofIfAddrmsg)
	body := append([]byte(nil), b...)
	a := p.Addr().AsSlice()
	body = attr(body, unix.IFA_LOCAL, a)
	body = attr(body, unix.IFA_ADDRESS, a)
	if err := r.do(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body); err != nil {
		return fmt.Errorf("address %s: %w", p, err)
	}
	return nil
}

// addDefaultRoute routes every address of the family out of link index.
func (r *rtnl) addDefaultRoute(index int, v6 bool) error {
	m := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	if v6 {
		m.Family, m.Scope = unix.AF_INET6, unix.RT_SCOPE_UNIVERSE
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&m)), unix.SizeofRtMsg)
	body := append([]byte(nil), b...)
	body = attr(body, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(index)))
	if err := r.do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body); err != nil {
		return fmt.Errorf("default route (IPv6 %v): %w", v6, err)
	}
	return nil
}
