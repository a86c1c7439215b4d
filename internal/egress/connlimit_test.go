package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// trickle opens a connection from the loopback address from and sends the
// start of a request head that never ends, as a hostile client would.
func trickle(t *testing.T, proxy net.Addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", proxy.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() }) // the test may have closed it already
	_, _ = io.WriteString(c, "CONNECT api.bank.example:443 HTTP/1.1\r\nX-Slow: aaaa")
	return c
}

// closedSoon reports whether the proxy closed c within d.
func closedSoon(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestPendingConnectionCaps is a regression test:
// nothing capped the connections the proxy held before authenticating, and
// 1000 clients trickling a 60 KB head held ~82 KiB each. Now a client
// address holds at most MaxPendingPerClient such connections and all
// clients MaxPendingConns; the rest are closed unread. A connection that
// became a tunnel frees its place.
func TestPendingConnectionCaps(t *testing.T) {
	echo := startEcho(t)
	s := startServer(t, echo, func(c *Config) { c.MaxPendingConns, c.MaxPendingPerClient = 6, 4 })
	addr := s.srv.Addr()

	var held []net.Conn
	for range 4 {
		held = append(held, trickle(t, addr, "127.0.0.2"))
	}
	if over := trickle(t, addr, "127.0.0.2"); !closedSoon(over, 2*time.Second) {
		t.Fatal("a fifth connection from one client was held")
	}
	for range 2 {
		held = append(held, trickle(t, addr, "127.0.0.3"))
	}
	if over := trickle(t, addr, "127.0.0.4"); !closedSoon(over, 2*time.Second) {
		t.Fatal("a connection over the total cap was held")
	}
	for _, c := range held {
		if closedSoon(c, 50*time.Millisecond) {
			t.Fatal("a connection within the caps was closed")
		}
	}
	if n := s.srv.pending.pending(); n != 6 {
		t.Fatalf("%d pending connections counted, want 6", n)
	}

	// One hostile connection goes; a plugin's CONNECT gets its place, and
	// once it is a tunnel it no longer counts as pending.
	mustClose(t, held[0])
	testutil.Eventually(t, 5*time.Second, "the closed connection is released", func() (bool, string) {
		n := s.srv.pending.pending()
		return n == 5, fmt.Sprintf("%d pending", n)
	})
	tunnel := openTunnel(t, addr, echo)
	echoOnce(t, tunnel, "through")
	if n := s.srv.pending.pending(); n != 5 {
		t.Fatalf("%d pending after the tunnel opened, want 5", n)
	}
}

// TestPendingConnectionsMemory holds the most pending connections the
// defaults allow, each trickling most of a maximal head, and checks the
// heap they cost stays far below the proxy's 256 MiB limit; the clients
// beyond the caps cost nothing.
func TestPendingConnectionsMemory(t *testing.T) {
	if n, err := openFilesLimit(); err == nil && n < 2*DefaultMaxPendingConns+256 {
		t.Skipf("RLIMIT_NOFILE is %d; this test needs %d descriptors", n, 2*DefaultMaxPendingConns+256)
	}
	s := startServer(t, startEcho(t), nil)
	addr := s.srv.Addr()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	head := make([]byte, 12<<10)
	for i := range head {
		head[i] = 'a'
	}
	clients := 0
	for ip := 2; clients < DefaultMaxPendingConns+64; ip++ {
		for range DefaultMaxPendingPerClient {
			c := trickle(t, addr, fmt.Sprintf("127.0.1.%d", ip))
			_, _ = c.Write(head)
			clients++
		}
	}
	testutil.Eventually(t, 10*time.Second, "the proxy holds the capped number", func() (bool, string) {
		n := s.srv.pending.pending()
		return n == DefaultMaxPendingConns, fmt.Sprintf("%d pending", n)
	})
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapInuse) - int64(before)
	t.Logf("%d clients, %d held, heap grew %d KiB (%d KiB per held connection)",
		clients, DefaultMaxPendingConns, grown>>10, grown/int64(DefaultMaxPendingConns)>>10)
	if grown > 64<<20 {
		t.Fatalf("heap grew %d MiB holding %d trickling connections", grown>>20, DefaultMaxPendingConns)
	}
}

// openFilesLimit is the process's soft limit of open descriptors.
func openFilesLimit() (uint64, error) {
	var l syscall.Rlimit
	err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur, err
}
