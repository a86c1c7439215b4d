package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The trap's link: its name and the addresses the sandbox's process sends
// from (a benchmarking range and a unique-local one, never answered).
const tunName = "trap0"

var (
	tunAddr4 = netip.MustParsePrefix("198.18.0.1/32")
	tunAddr6 = netip.MustParsePrefix("fd6f:6600::1/128")
)

// setUpNetns configures the calling thread's (new, empty) network
// namespace: loopback up, and a TUN link up with an address of each family
// and the default routes, so that every packet bound outside loopback
// reaches the returned TUN file. ipv6 is false when the kernel has no IPv6.
func setUpNetns() (tun *os.File, ipv6 bool, err error) {
	if err := linkUp("lo"); err != nil {
		return nil, false, err
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(tunName)
	if err != nil {
		_ = unix.Close(fd)
		return nil, false, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		_ = unix.Close(fd)
		return nil, false, fmt.Errorf("creating the TUN link: %w", err)
	}
	tun = os.NewFile(uintptr(fd), "/dev/net/tun")
	fail := func(err error) (*os.File, bool, error) {
		_ = tun.Close()
		return nil, false, err
	}
	_, statErr := os.Stat("/proc/sys/net/ipv6")
	ipv6 = statErr == nil
	if ipv6 {
		// No link-local address, router solicitations or the like: the
		// only IPv6 packets on the link are the process's own.
		for _, k := range []string{"addr_gen_mode=1", "accept_ra=0", "router_solicitations=0", "accept_dad=0"} {
			name, val, _ := strings.Cut(k, "=")
			_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+tunName+"/"+name, []byte(val), 0)
		}
	}
	if err := linkUp(tunName); err != nil {
		return fail(err)
	}
	index, err := linkIndex(tunName)
	if err != nil {
		return fail(err)
	}
	nl, err := openRtnl()
	if err != nil {
		return fail(err)
	}
	defer nl.close()
	err = errors.Join(nl.addAddr(index, tunAddr4), nl.addDefaultRoute(index, false))
	if err == nil && ipv6 {
		err = errors.Join(nl.addAddr(index, tunAddr6), nl.addDefaultRoute(index, true))
	}
	if err != nil {
		return fail(fmt.Errorf("the TUN link: %w", err))
	}
	return tun, ipv6, nil
}

// linkUp sets a link of the calling thread's namespace up.
func linkUp(name string) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	defer func() { _ = unix.Close(s) }() // an ioctl socket
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("link %s flags: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	return nil
}

// linkIndex returns a link's index in the calling thread's namespace.
func linkIndex(name string) (int, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(s) }() // an ioctl socket
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("link %s index: %w", name, err)
	}
	return int(ifr.Uint32()), nil
}
