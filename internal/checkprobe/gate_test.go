package checkprobe

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// dnsServer answers every query over UDP and TCP on one loopback port each,
// until stop closes both sockets, after which the kernel refuses both.
type dnsServer struct {
	udp, tcp string
	once     sync.Once
	servers  []*dns.Server
}

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(m)
		_ = w.WriteMsg(r)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{udp: pc.LocalAddr().String(), tcp: ln.Addr().String(), servers: []*dns.Server{
		{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler},
	}}
	for _, srv := range s.servers {
		go func() { _ = srv.ActivateAndServe() }()
	}
	t.Cleanup(s.stop)
	return s
}

func (s *dnsServer) stop() {
	s.once.Do(func() {
		for _, srv := range s.servers {
			_ = srv.Shutdown()
		}
	})
}

// testGateEnv is a pod's environment for the gate: getenv from vars and
// the resolv.conf given.
func testGateEnv(vars map[string]string, resolv string) gateEnv {
	return gateEnv{
		getenv:     func(k string) string { return vars[k] },
		resolvConf: func() ([]byte, error) { return []byte(resolv), nil },
		now:        time.Now,
		pause:      5 * time.Millisecond,
	}
}

// gateRun is one runGate in the background.
type gateRun struct {
	done           chan int
	stdout, stderr *lockedWriter
}

func startGate(ctx context.Context, s plugins.GateSettings, env gateEnv) *gateRun {
	r := &gateRun{done: make(chan int, 1), stdout: &lockedWriter{}, stderr: &lockedWriter{}}
	go func() { r.done <- runGate(ctx, s, env, r.stdout, r.stderr) }()
	return r
}

func mustTargets(t *testing.T, list string) []plugins.GateTarget {
	t.Helper()
	targets, err := plugins.ParseGateTargets(list)
	if err != nil {
		t.Fatal(err)
	}
	return targets
}

// TestGateWaitsForIsolation: while a target answers, over UDP or TCP, the
// gate does not let the plugin start; once nothing answers (the kernel
// refuses the closed ports, as a rejecting firewall would), it exits 0 and
// says how long it took. This is the gate's whole promise: the plugin's
// container starts only after its first round of attempts, and every round
// before, found everything blocked.
func TestGateWaitsForIsolation(t *testing.T) {
	srv := startDNS(t) // a TCP listener that answers, like the cluster DNS
	s := plugins.GateSettings{
		Targets:        mustTargets(t, "tcp="+srv.tcp+",tcp="+closedPort(t)),
		AttemptTimeout: 300 * time.Millisecond, Rounds: 2, Deadline: 20 * time.Second,
	}
	run := startGate(t.Context(), s, testGateEnv(nil, ""))
	select {
	case code := <-run.done:
		t.Fatalf("the gate exited %d while %s answered: %s%s", code, srv.tcp, run.stdout, run.stderr)
	case <-time.After(time.Second):
	}
	srv.stop()
	select {
	case code := <-run.done:
		if code != probewire.ExitOK {
			t.Fatalf("exit %d after the server stopped: %s", code, run.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gate did not pass 10 s after the server stopped")
	}
	out := run.stdout.String()
	if !strings.HasPrefix(out, "isolation gate: in place after ") || !strings.Contains(out, "tcp "+srv.tcp+" refused") {
		t.Errorf("stdout %q", out)
	}
}

// TestGateCountsSilenceAsBlocked: a target that never answers (a dropping
// firewall) counts as blocked once each attempt's timeout passes.
func TestGateCountsSilenceAsBlocked(t *testing.T) {
	s := plugins.GateSettings{
		Targets:        mustTargets(t, "tcp="+fullBacklog(t)),
		AttemptTimeout: 100 * time.Millisecond, Rounds: 2, Deadline: 10 * time.Second,
	}
	run := startGate(t.Context(), s, testGateEnv(nil, ""))
	if code := <-run.done; code != probewire.ExitOK {
		t.Fatalf("exit %d: %s", code, run.stderr)
	}
	if out := run.stdout.String(); !strings.Contains(out, "timeout") {
		t.Errorf("stdout %q does not say the attempts timed out", out)
	}
}

// TestGateFailsWhenIsolationNeverComes: a target that keeps answering makes
// the gate fail at its deadline, naming the target and what it answered,
// which becomes the init container's termination message.
func TestGateFailsWhenIsolationNeverComes(t *testing.T) {
	srv := startDNS(t)
	s := plugins.GateSettings{
		Targets:        mustTargets(t, "tcp="+srv.tcp+",tcp="+closedPort(t)),
		AttemptTimeout: 100 * time.Millisecond, Rounds: 2, Deadline: 700 * time.Millisecond,
	}
	run := startGate(t.Context(), s, testGateEnv(nil, ""))
	select {
	case code := <-run.done:
		if code != probewire.ExitFailed {
			t.Fatalf("exit %d, want %d", code, probewire.ExitFailed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gate ran past its deadline")
	}
	msg := run.stderr.String()
	want := "isolation not in place after 700ms"
	if !strings.Contains(msg, want) || !strings.Contains(msg, "tcp "+srv.tcp+": open") || strings.Contains(msg, "refused") {
		t.Errorf("stderr %q: want %q and only the answering target", msg, want)
	}
	if run.stdout.String() != "" {
		t.Errorf("stdout %q on failure", run.stdout)
	}
}

// TestGateOneOpenRoundResets: rounds must find everything blocked in a
// row; a target that answers in between starts the count again. The
// target here answers every other attempt.
func TestGateOneOpenRoundResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// Alternate between listening and not: open, closed, open, closed...
	// so no two rounds in a row are all blocked while it alternates.
	var mu sync.Mutex
	flips := 0
	stopFlip := make(chan struct{})
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		cur := ln
		for {
			select {
			case <-stopFlip:
				if cur != nil {
					_ = cur.Close()
				}
				return
			case <-time.After(3 * time.Millisecond):
			}
			mu.Lock()
			if cur != nil {
				_ = cur.Close()
				cur = nil
			} else if l, err := net.Listen("tcp", addr); err == nil {
				cur = l
			}
			flips++
			mu.Unlock()
		}
	}()
	s := plugins.GateSettings{Targets: mustTargets(t, "tcp="+addr), AttemptTimeout: 100 * time.Millisecond, Rounds: 10, Deadline: 300 * time.Millisecond}
	run := startGate(t.Context(), s, testGateEnv(nil, ""))
	code := <-run.done
	close(stopFlip)
	<-flipped
	if code == probewire.ExitOK {
		t.Fatalf("the gate passed 10 rounds in a row while its target answered every few milliseconds: %s", run.stdout)
	}
}

// TestExpandGateTargets: classes become attempts from the pod's
// resolv.conf and environment, sorted and without duplicates; a class with
// nothing to try is skipped and said; no attempt at all is an error.
func TestExpandGateTargets(t *testing.T) {
	env := testGateEnv(map[string]string{
		plugins.EnvAPIServerHost: "10.96.0.1", plugins.EnvAPIServerPort: "443",
		plugins.EnvNodeIP: "192.168.1.5",
	}, "search openfief.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver 10.96.0.10\noptions ndots:5\n")
	got, skipped, err := expandGateTargets(mustTargets(t, plugins.DefaultGateTargets+",tcp=203.0.113.7:443"), env)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range got {
		names = append(names, a.String())
	}
	want := []string{"tcp 10.96.0.10:53", "tcp 10.96.0.1:443", "tcp 192.168.1.5:53", "tcp 203.0.113.7:443"}
	if d := cmp.Diff(want, names); d != "" || len(skipped) != 0 {
		t.Errorf("attempts (-want +got):\n%s\nskipped %q", d, skipped)
	}

	_, skipped, err = expandGateTargets(mustTargets(t, plugins.DefaultGateTargets), testGateEnv(nil, "nameserver not-an-address\n"))
	if err == nil || len(skipped) != 3 {
		t.Errorf("nothing to try: err %v, skipped %q", err, skipped)
	}
	got, skipped, err = expandGateTargets(mustTargets(t, plugins.DefaultGateTargets), testGateEnv(map[string]string{plugins.EnvNodeIP: "fd00::5"}, ""))
	if err != nil || len(got) != 1 || !slices.ContainsFunc(skipped, func(s string) bool { return strings.HasPrefix(s, "cluster-dns") }) {
		t.Errorf("IPv6 node only: %v %q %v", got, skipped, err)
	}
}

// TestGateArgsRoundTrip: what the operator writes (GateSettings.Args) is
// what the gate reads back, and bad arguments are refused with exit 2.
func TestGateArgsRoundTrip(t *testing.T) {
	s := plugins.DefaultGateSettings()
	s.Targets = mustTargets(t, plugins.DefaultGateTargets+",tcp=[2001:db8::53]:53")
	got, err := parseGateArgs(s.Args()[1:], &lockedWriter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(s, got, cmp.Comparer(func(a, b plugins.GateTarget) bool { return a.String() == b.String() })); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range [][]string{
		{"gate"},
		{"gate", "--rounds=0", "cluster-dns"},
		{"gate", "--timeout=1ms", "cluster-dns"},
		{"gate", "--deadline=1h", "cluster-dns"},
		{"gate", "tcp=example.com:443"},
		{"gate", "udp=10.0.0.1:53"},
		{"gate", "dns-udp=10.0.0.1:53"},
	} {
		var errOut lockedWriter
		if code := Main(t.Context(), bad, &lockedWriter{}, &errOut, func(string) string { return "" }); code != probewire.ExitBadRequest {
			t.Errorf("%q: exit %d, want %d", bad, code, probewire.ExitBadRequest)
		}
	}
}

// TestNameservers reads only nameserver lines with IP literals.
func TestNameservers(t *testing.T) {
	got := nameservers([]byte("# comment\nnameserver 10.96.0.10\nnameserver  fd00::a\nnameserver\nnameserver host.example\nsearch a b\n"))
	if len(got) != 2 || got[0].String() != "10.96.0.10" || got[1].String() != "fd00::a" {
		t.Errorf("got %v", got)
	}
	if _, err := boundedfile.Read("/nonexistent-openfief", 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("readBounded of a missing file: %v", err)
	}
}

// TestGateReportKeepsLastOpening: a deadline that falls after a round in
// which every target looked blocked (an answering target whose attempt
// timed out on a loaded machine) still names what the round before found
// reachable, not "no round ended".
func TestGateReportKeepsLastOpening(t *testing.T) {
	open := gateObservation{attempt: gateAttempt{kind: plugins.GateTCP, address: "10.0.0.1:443"}, observed: probewire.ObservedOpen, detail: "connected"}
	timedOut := open
	timedOut.observed, timedOut.detail = probewire.ObservedTimeout, "i/o timeout"
	refused := gateObservation{attempt: gateAttempt{kind: plugins.GateTCP, address: "10.0.0.2:80"}, observed: probewire.ObservedRefused, detail: "refused"}

	for _, c := range []struct {
		name           string
		last, lastOpen []gateObservation
		want           string
	}{
		{"no round", nil, nil, "no round ended before the deadline"},
		{"open at the end", []gateObservation{open, refused}, []gateObservation{open, refused}, "still reachable: tcp 10.0.0.1:443: open (connected)"},
		{"blocked at the end", []gateObservation{timedOut, refused}, []gateObservation{open, refused},
			"everything blocked in the last 1 round(s), 2 needed in a row; reachable the round before: tcp 10.0.0.1:443: open (connected)"},
		{"never open", []gateObservation{timedOut, refused}, nil, "everything blocked in the last 1 round(s), 2 needed in a row"},
	} {
		if got := notInPlace(c.last, c.lastOpen, 1, 2); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
