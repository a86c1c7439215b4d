package egress

import (
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestSplicedIdleTunnelsHoldNoPipe: on Linux a spliced tunnel moves its
// bytes through a pipe, and gives the pipe back once its source is dry, so
// tunnels that have moved bytes and now wait hold none: the process's pipes
// stay within the kept ones (maxIdlePipes) however many tunnels are open.
func TestSplicedIdleTunnelsHoldNoPipe(t *testing.T) {
	const tunnels = 2 * maxIdlePipes
	e := newEnv(t, func(o *Options) { o.Splice = true; o.MaxTunnelsPerPlugin = tunnels; o.MaxTunnels = tunnels })
	// The shared echo server's io.Copy splices, holding a pipe per
	// connection: this one copies through a buffer, so every pipe counted
	// is the proxy's.
	e.dialer.redirect[e.echoAddr] = startBufferedEcho(t)
	before := openPipes(t)
	for range tunnels {
		echoOnce(t, e.tunnel(tokenX, "api.bank.example:"+e.echoPort), "hello")
	}
	idlePipes.mu.Lock()
	kept := len(idlePipes.free)
	idlePipes.mu.Unlock()
	if kept == 0 {
		t.Fatal("no pipe kept after the tunnels moved bytes: they did not splice")
	}
	// Each tunnel moving bytes in both directions at once would hold two
	// pipes, four files; waiting, none.
	if grown := openPipes(t) - before; grown > 2*maxIdlePipes {
		t.Errorf("%d more pipe ends open with %d idle tunnels, want at most the %d of the kept pipes", grown, tunnels, 2*maxIdlePipes)
	}
}

// openPipes counts this process's open pipe ends.
func openPipes(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + d.Name()); err == nil && strings.HasPrefix(target, "pipe:") {
			n++
		}
	}
	return n
}

// startBufferedEcho serves an echo on 127.0.0.1 that copies through a
// buffer, never splicing, until the test ends.
func startBufferedEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Hidden behind plain Reader and Writer, c cannot splice.
				_, _ = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
			}()
		}
	}()
	t.Cleanup(func() {
		mustClose(t, ln)
		mu.Lock()
		for _, c := range conns {
			_ = c.Close() // ends its copy; the peer may have closed it first
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
