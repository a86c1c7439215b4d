// Package netns makes a network namespace of its own for a real node and
// opens sockets and runs commands inside it, so that two nodes on one
// machine do not share interfaces, routes, ports or netfilter rules.
//
// A namespace is held open by a bind mount of it at a path of the node's
// state folder, so it outlives the thread that made it, `nsenter
// --net=<path>` joins it, and removing the node's folder after an unmount
// removes it. Code runs inside it through [NS.Do], which keeps one OS thread
// in the namespace for the duration and returns it to the machine's
// namespace afterwards (containernetworking's ns package); a socket keeps
// the namespace it was made in, so listeners and connections opened inside
// serve from there for as long as they live.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// NS is a network namespace held open at a path.
type NS struct {
	path   string
	handle ns.NetNS
}

// Create makes a new network namespace, bind-mounts it at path (which must
// not exist yet; its folder must) and brings its loopback up, which a new
// namespace has down. On error nothing is left at path.
func Create(path string) (n *NS, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	mounted := false
	defer func() {
		if err != nil {
			if mounted {
				_ = unix.Unmount(path, unix.MNT_DETACH)
			}
			_ = os.Remove(path)
		}
	}()

	// The namespace is made by a thread of its own that never leaves it:
	// the goroutine returns still locked to the thread, so the Go runtime
	// ends the thread rather than reuse it in the wrong namespace.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			// Still in the machine's namespace: the thread may be reused.
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("netns: bind-mounting the namespace at %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	mounted = true
	handle, err := ns.GetNS(path)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	n = &NS{path: path, handle: handle}
	if err := n.Do(loopbackUp); err != nil {
		_ = handle.Close()
		return nil, fmt.Errorf("netns: bringing lo up in %s: %w", path, err)
	}
	return n, nil
}

// loopbackUp sets the flag IFF_UP on lo in the current thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }() // nothing was written through it
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Path is where the namespace is mounted: what `nsenter --net=` takes.
func (n *NS) Path() string { return n.path }

// Do runs fn on an OS thread inside the namespace. Goroutines fn starts run
// in the machine's namespace, not this one.
func (n *NS) Do(fn func() error) error {
	return n.handle.Do(func(ns.NetNS) error { return fn() })
}

// Listen opens a stream listener inside the namespace, as
// net.ListenConfig.Listen does.
func (n *NS) Listen(ctx context.Context, network, address string) (ln net.Listener, err error) {
	err = n.Do(func() error {
		ln, err = (&net.ListenConfig{}).Listen(ctx, network, address)
		return err
	})
	return ln, err
}

// ListenPacket opens a packet listener inside the namespace, as
// net.ListenConfig.ListenPacket does.
func (n *NS) ListenPacket(ctx context.Context, network, address string) (pc net.PacketConn, err error) {
	err = n.Do(func() error {
		pc, err = (&net.ListenConfig{}).ListenPacket(ctx, network, address)
		return err
	})
	return pc, err
}

// DialContext connects from inside the namespace, as net.Dialer.DialContext
// does. A name in address is resolved inside the namespace too.
func (n *NS) DialContext(ctx context.Context, network, address string) (c net.Conn, err error) {
	err = n.Do(func() error {
		c, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Command returns a command that runs name with args inside the namespace
// (and the machine's other namespaces: `nsenter --net` joins only the
// network one), through nsenter.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.path, "--", name}, args...)...)
}

// Remove closes the namespace's handle and unmounts and removes its path.
// The kernel frees the namespace once nothing else holds it: no process
// inside, no socket made inside still open.
func (n *NS) Remove() error {
	var errs []error
	if err := n.handle.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := Unmount(n.path); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Unmount unmounts a namespace mounted at path and removes the path: what
// cleanup does for a node whose process died before Remove. A path that is
// not there is no error.
func Unmount(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}
