//go:build cluster

package devstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestKilledLocalPluginPortNotTaken is another local user waiting for a
// local plugin's port, on the local platform with local plugins: the real
// nbp-fx binary as a process of the local runner, the in-process core
// calling it every 2 s with a core token minted for it. While it runs, and
// after its process is killed (SIGKILL), binding its port fails with
// EADDRINUSE, so no call of the core reaches anything but the plugin; the
// runner starts the process again on the same port within a bound, and the
// core's syncs succeed there again.
func TestKilledLocalPluginPortNotTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var progress bytes.Buffer
	s, err := Start(ctx, Options{
		Dir: dir, LocalPlugins: true, Progress: &progress,
		CoreScheduler: core.SchedulerOptions{
			DefaultInterval: 2 * time.Second, FirstSyncDelay: -1, Jitter: -1,
			Backoff: 200 * time.Millisecond, MaxBackoff: time.Second, MaxAttempts: 30,
		},
	})
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, progress.String())
	}
	t.Cleanup(s.Stop)
	openfief := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		code := cli.Main(ctx, append([]string{"--kubeconfig", s.KubeconfigPath}, args...), cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		if code != cli.ExitOK {
			t.Fatalf("openfief %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
		return out.String()
	}
	// lastSync is the core's last sync of fx, and whether it succeeded.
	lastSyncRE := regexp.MustCompile(`Last sync:\s+(\S+) \([^)]*\), (succeeded|failed)`)
	lastSync := func() (time.Time, bool, string) {
		out := openfief("plugin", "status", "fx", "--core-url", s.CoreURL)
		m := lastSyncRE.FindStringSubmatch(out)
		if m == nil {
			return time.Time{}, false, out
		}
		at, err := time.Parse(time.RFC3339, m[1])
		if err != nil {
			t.Fatalf("status: last sync %q: %v", m[1], err)
		}
		return at, m[2] == "succeeded", out
	}

	openfief("plugin", "install", "fx", "--image", s.Images["demo-v1"].String(), "--signers", s.SignersFile)
	openfief("plugin", "approve", "fx", "--yes")
	var url string
	testutil.Eventually(t, 2*time.Minute, "the runner routes fx to a local process", func() (bool, string) {
		url = s.local.resolve("fx")
		return strings.HasPrefix(url, "http://127.0.0.1:"), url
	})
	port, err := strconv.Atoi(url[strings.LastIndex(url, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local-plugins", "bin", "nbp-fx")
	testutil.Eventually(t, time.Minute, "the core syncs fx at its local process", func() (bool, string) {
		at, ok, out := lastSync()
		return !at.IsZero() && ok, out
	})
	first := processesOf(t, bin)
	if len(first) != 1 {
		t.Fatalf("processes of %s: %v, want one", bin, first)
	}
	if err := bindPort(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("while fx runs, another listener binding its port %d: %v, want EADDRINUSE", port, err)
	}

	killed := time.Now()
	if err := syscall.Kill(first[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Another local user tries to take the port until the core synced fx
	// again after the kill; the core calls fx every 2 s, with retries.
	var restarted time.Duration
	for deadline := killed.Add(time.Minute); ; {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			t.Fatalf("%v after fx's process was killed, another listener bound its port %d; %s", time.Since(killed).Round(time.Millisecond), port, whatTheCoreSent(ln))
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("binding fx's port: %v, want EADDRINUSE", err)
		}
		if restarted == 0 {
			if now := processesOf(t, bin); len(now) == 1 && now[0] != first[0] {
				restarted = time.Since(killed)
			}
		}
		if at, ok, _ := lastSync(); restarted != 0 && ok && at.After(killed.Add(time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			_, _, out := lastSync()
			t.Fatalf("a minute after the kill: restarted after %v (0: not), core status:\n%s", restarted, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.local.resolve("fx"); got != url {
		t.Errorf("after the restart fx is routed to %s, want the held %s", got, url)
	}
	if bound := 10 * time.Second; restarted > bound {
		t.Errorf("fx's process started again %v after the kill, want within %v", restarted, bound)
	}
	t.Logf("fx's process started again %v after the kill, on the same port; the core synced it there again", restarted.Round(time.Millisecond))
}

// whatTheCoreSent waits up to 30 s on ln, a listener the test should never
// have got, for a call, and says whether it carried a bearer token (the
// token itself is never shown).
func whatTheCoreSent(ln net.Listener) string {
	defer func() { _ = ln.Close() }()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		return "no call reached it within 30 s (" + err.Error() + ")"
	}
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(&boundedReader{r: c, n: 64 << 10}))
	if err != nil {
		return "a connection reached it (" + err.Error() + ")"
	}
	auth := req.Header.Get("Authorization")
	return fmt.Sprintf("it received the core's %s %s with a bearer token: %v", req.Method, req.URL.Path, strings.HasPrefix(auth, "Bearer ") && len(auth) > len("Bearer "))
}

// boundedReader reads at most n bytes of r.
type boundedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("request head over the bound")
	}
	p = p[:min(len(p), b.n)]
	n, err := b.r.Read(p)
	b.n -= n
	return n, err
}

// processesOf lists the processes of this user running the executable
// bin, by /proc.
func processesOf(t *testing.T, bin string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			pids = append(pids, pid)
		}
	}
	return pids
}
