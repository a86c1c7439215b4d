package netns_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster/netns"
)

// greet accepts connections on ln and writes word to each, until ln closes.
func greet(ln net.Listener, word string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte(word + "\n"))
		_ = c.Close()
	}
}

// hear reads the first line of what c sends and closes it.
func hear(t *testing.T, c net.Conn) string {
	t.Helper()
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

func create(t *testing.T) *netns.NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root (CAP_SYS_ADMIN)")
	}
	n, err := netns.Create(filepath.Join(t.TempDir(), "netns"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Remove(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// TestListenInside opens listeners on the same loopback port on the
// machine and inside a new namespace, and checks that each side reaches its
// own: the namespace is apart from the machine's, its loopback is up, and
// the test's thread is back in the machine's namespace after each call.
func TestListenInside(t *testing.T) {
	n := create(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = host.Close() }()
	go greet(host, "machine")
	addr := host.Addr().String()

	inside, err := n.Listen(ctx, "tcp", addr) // the same port: another namespace
	if err != nil {
		t.Fatalf("listening on %s inside the namespace: %v", addr, err)
	}
	defer func() { _ = inside.Close() }()
	go greet(inside, "namespace")

	for range 20 { // many calls, so a thread left in the namespace would show
		c, err := n.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := hear(t, c); got != "namespace" {
			t.Fatalf("a dial from inside reached %q, want the namespace's listener", got)
		}
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := hear(t, c); got != "machine" {
			t.Fatalf("a dial from the test reached %q, want the machine's listener", got)
		}
	}

	// A port only the namespace listens on is closed on the machine.
	only, err := n.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = only.Close() }()
	if c, err := net.DialTimeout("tcp", only.Addr().String(), 2*time.Second); err == nil {
		_ = c.Close()
		t.Errorf("the machine reached %s, which only the namespace listens on", only.Addr())
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing %s from the machine: %v, want connection refused", only.Addr(), err)
	}

	pc, err := n.ListenPacket(ctx, "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Close(); err != nil {
		t.Error(err)
	}
}

// TestCommandInside runs a command inside the namespace through nsenter and
// checks that it sees only the namespace's own interfaces: /proc/net/dev,
// read from inside, lists lo alone.
func TestCommandInside(t *testing.T) {
	n := create(t)
	out, err := n.Command(t.Context(), "cat", "/proc/net/dev").CombinedOutput()
	if err != nil {
		t.Fatalf("cat /proc/net/dev inside: %v\n%s", err, out)
	}
	var links []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[2:] { // two header lines
		name, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		links = append(links, name)
	}
	if len(links) != 1 || links[0] != "lo" {
		t.Errorf("interfaces inside the namespace: %v, want only lo\n%s", links, out)
	}
}

// TestRemoveLeavesNothing checks that Remove unmounts and deletes the
// namespace's path, and that Unmount of a path no longer there is no error.
func TestRemoveLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root (CAP_SYS_ADMIN)")
	}
	path := filepath.Join(t.TempDir(), "netns")
	n, err := netns.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if !mounted(t, path) {
		t.Fatalf("%s is not a mount point after Create", path)
	}
	if err := n.Remove(); err != nil {
		t.Fatal(err)
	}
	if mounted(t, path) {
		t.Errorf("%s still mounted after Remove", path)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after Remove: %v", path, err)
	}
	if err := netns.Unmount(path); err != nil {
		t.Errorf("Unmount of a removed namespace: %v", err)
	}
	if _, err := netns.Create(filepath.Join(t.TempDir(), "no", "such", "folder")); err == nil {
		t.Error("Create in a folder that does not exist succeeded")
	}
}

// mounted reports whether path is a mount point of this process.
func mounted(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
