package egress

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestSplicedTunnel runs a tunnel with Options.Splice between the proxy's
// bare TCP sockets (splice(2) on Linux, the copy loop elsewhere): 4 MiB
// cross it both ways intact, the early bytes behind the CONNECT go first,
// the access log and the byte counters count every byte, and the client's
// half-close reaches the host.
func TestSplicedTunnel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options) { o.Splice = true; o.Metrics = m })
	c := e.tunnel(tokenX, "api.bank.example:"+e.echoPort)
	defer mustClose(t, c)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))

	payload := make([]byte, 4<<20)
	_, _ = rand.Read(payload) // never fails
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(*bufferedConn).Conn.(interface{ CloseWrite() error }).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c) // to the echo's end, which follows our half-close
	if err != nil {
		t.Fatalf("read through the tunnel: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write through the tunnel: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echo: %d bytes back, differing from the %d sent", len(got), len(payload))
	}
	e.waitOpenTunnels(t, 0, "the tunnel's access-log line")
	want := fmt.Sprintf(`"bytes_up":%d,"bytes_down":%d`, len(payload), len(payload))
	if !strings.Contains(e.log.String(), want) {
		t.Errorf("no access-log line with %s:\n%s", want, e.log.String())
	}
	for _, dir := range []string{"up", "down"} {
		if n := testutil.ToFloat64(m.bytes.WithLabelValues(dir)); n != float64(len(payload)) {
			t.Errorf("bytes %s = %v, want %d", dir, n, len(payload))
		}
	}
}

// TestSplicedTunnelLimits: a spliced tunnel still closes when idle, on
// revocation and at shutdown.
func TestSplicedTunnelLimits(t *testing.T) {
	const idle = 300 * time.Millisecond
	e := newEnv(t, func(o *Options) { o.Splice = true; o.IdleTimeout = idle })
	p := e.echoPort
	silent := e.tunnel(tokenX, "api.bank.example:"+p)
	echoOnce(t, silent, "then nothing")
	revoked := e.tunnel(tokenX, "files.bank.example:"+p)
	busy := e.tunnel(tokenY, "other.example:"+p)

	e.store.Set(plugins.AllowLists{"x": {"api.bank.example:" + p}, "y": {"other.example:" + p}})
	waitClosed(t, revoked, 2*time.Second)
	start := time.Now()
	for time.Since(start) < 3*idle {
		echoOnce(t, busy, "ping")
		time.Sleep(idle / 4)
	}
	waitClosed(t, silent, 2*time.Second)
	echoOnce(t, busy, "still open")

	ctx, cancel := contextWithTimeout(time.Millisecond)
	defer cancel()
	if err := e.proxy.Shutdown(ctx); err == nil {
		t.Error("Shutdown returned nil with a tunnel open past the deadline")
	}
	waitClosed(t, busy, 2*time.Second)
	e.waitOpenTunnels(t, 0, "tunnels released")
	for _, reason := range []string{CloseRevoked, CloseIdle, CloseShutdown} {
		if !strings.Contains(e.log.String(), `"reason":"`+reason+`"`) {
			t.Errorf("no %s line:\n%s", reason, e.log.String())
		}
	}
}
