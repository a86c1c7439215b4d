package checkprobe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// resolvConf is where the gate finds the cluster DNS (plugins.GateClusterDNS).
const resolvConf = "/etc/resolv.conf"

// maxResolvConfBytes bounds the read of resolvConf.
const maxResolvConfBytes = 64 << 10

// gateEnv is what the gate reads besides its arguments.
type gateEnv struct {
	getenv     func(string) string
	resolvConf func() ([]byte, error)
	now        func() time.Time
	// pause is the wait between rounds.
	pause time.Duration
}

// parseGateArgs reads `gate [--timeout D] [--rounds N] [--deadline D]
// TARGET...` into settings (plugins.GateSettings.Args writes them).
func parseGateArgs(args []string, stderr io.Writer) (plugins.GateSettings, error) {
	def := plugins.DefaultGateSettings()
	fs := flag.NewFlagSet("check-probe gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", def.AttemptTimeout, "how long one attempt waits for an answer")
	rounds := fs.Int("rounds", def.Rounds, "rounds in a row that must find every target blocked")
	deadline := fs.Duration("deadline", def.Deadline, "how long to wait for isolation before failing")
	if err := fs.Parse(args); err != nil {
		return plugins.GateSettings{}, err
	}
	if fs.NArg() == 0 {
		return plugins.GateSettings{}, errors.New("no target: name at least one of cluster-dns, api-server, node-dns or tcp=IP:PORT")
	}
	targets, err := plugins.ParseGateTargets(strings.Join(fs.Args(), ","))
	if err != nil {
		return plugins.GateSettings{}, err
	}
	s := plugins.GateSettings{Targets: targets, AttemptTimeout: *timeout, Rounds: *rounds, Deadline: *deadline}
	return s, s.Validate()
}

// gateAttempt is one concrete thing a round tries.
type gateAttempt struct {
	kind    plugins.GateKind
	address string
}

func (a gateAttempt) String() string { return string(a.kind) + " " + a.address }

// expandGateTargets turns classes into concrete attempts, from the pod's
// resolv.conf and environment. A class that finds nothing to try is
// reported in skipped (a pod without a node address, a resolv.conf without
// a nameserver): the gate goes on with the rest, but never with none.
func expandGateTargets(targets []plugins.GateTarget, env gateEnv) (attempts []gateAttempt, skipped []string, err error) {
	add := func(kind plugins.GateKind, addr string) {
		a := gateAttempt{kind, addr}
		if !slices.Contains(attempts, a) {
			attempts = append(attempts, a)
		}
	}
	dns := func(host string) { add(plugins.GateTCP, net.JoinHostPort(host, "53")) }
	for _, t := range targets {
		switch t.Class {
		case "":
			add(t.Kind, t.Address.String())
		case plugins.GateClusterDNS:
			raw, rerr := env.resolvConf()
			servers := nameservers(raw)
			if rerr != nil || len(servers) == 0 {
				skipped = append(skipped, t.Class+": no nameserver in "+resolvConf)
				continue
			}
			for _, s := range servers {
				dns(s.String())
			}
		case plugins.GateAPIServer:
			host, port := env.getenv(plugins.EnvAPIServerHost), env.getenv(plugins.EnvAPIServerPort)
			ap, perr := netip.ParseAddrPort(net.JoinHostPort(host, port))
			if host == "" || perr != nil {
				skipped = append(skipped, t.Class+": no "+plugins.EnvAPIServerHost+" and "+plugins.EnvAPIServerPort)
				continue
			}
			add(plugins.GateTCP, ap.String())
		case plugins.GateNodeDNS:
			a, perr := netip.ParseAddr(env.getenv(plugins.EnvNodeIP))
			if perr != nil {
				skipped = append(skipped, t.Class+": no "+plugins.EnvNodeIP)
				continue
			}
			dns(a.String())
		}
	}
	if len(attempts) == 0 {
		return nil, skipped, errors.New("nothing to try: " + strings.Join(skipped, "; "))
	}
	if len(attempts) > plugins.MaxGateTargets {
		return nil, skipped, fmt.Errorf("%d attempts after expansion, more than %d", len(attempts), plugins.MaxGateTargets)
	}
	slices.SortFunc(attempts, func(a, b gateAttempt) int { return strings.Compare(a.String(), b.String()) })
	return attempts, skipped, nil
}

// nameservers reads the nameserver lines of a resolv.conf, in order, IP
// literals only (a zone-scoped link-local address included).
func nameservers(raw []byte) []netip.Addr {
	var out []netip.Addr
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(f[1]); err == nil && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// gateObservation is what one attempt of a round saw.
type gateObservation struct {
	attempt  gateAttempt
	observed string
	detail   string
}

// blocked says whether an observation counts as blocked: refused actively
// (a rejecting firewall) or not answered within the attempt's timeout (a
// dropping one). Anything else, an answer or an error the gate cannot read
// as either, counts as reachable: the gate fails closed.
func (o gateObservation) blocked() bool {
	return o.observed == probewire.ObservedRefused || o.observed == probewire.ObservedTimeout
}

// gateRound tries every attempt once, concurrently, each bounded by timeout.
func gateRound(ctx context.Context, attempts []gateAttempt, timeout time.Duration) []gateObservation {
	out := make([]gateObservation, len(attempts))
	var wg sync.WaitGroup
	for i, a := range attempts {
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			// TCP only, sending nothing: see plugins.GateTCP.
			observed, detail := tryTCP(actx, a.address)
			out[i] = gateObservation{attempt: a, observed: observed, detail: cleanDetail(detail)}
		})
	}
	wg.Wait()
	return out
}

// runGate tries the targets round after round until s.Rounds rounds in a
// row find every one blocked (exit probewire.ExitOK, with one line on
// stdout saying how long it took and what each target did), or s.Deadline
// passes (exit probewire.ExitFailed, naming on stderr each target still
// reachable; the init container's termination message). Nothing the gate
// prints comes from outside but the short, cleaned error details.
func runGate(ctx context.Context, s plugins.GateSettings, env gateEnv, stdout, stderr io.Writer) int {
	start := env.now()
	attempts, skipped, err := expandGateTargets(s.Targets, env)
	for _, sk := range skipped {
		fmt.Fprintln(stderr, "isolation gate: skipped", sk)
	}
	if err != nil {
		fmt.Fprintln(stderr, "isolation gate:", err)
		return probewire.ExitFailed
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(s.Deadline))
	defer cancel()
	var (
		inARow int
		rounds int
		last   []gateObservation
		// lastOpen is the most recent round that found a target reachable:
		// a round that ends with every target blocked (an attempt timed out
		// on a loaded machine, say) must not hide what was seen before it.
		lastOpen []gateObservation
	)
	for {
		obs := gateRound(ctx, attempts, s.AttemptTimeout)
		if ctx.Err() != nil {
			break // the deadline cut this round short: its timeouts say nothing
		}
		last = obs
		rounds++
		if allBlocked(last) {
			inARow++
			if inARow >= s.Rounds {
				fmt.Fprintf(stdout, "isolation gate: in place after %v (%d rounds): %s\n",
					env.now().Sub(start).Round(time.Millisecond), rounds, summary(last))
				return probewire.ExitOK
			}
		} else {
			inARow = 0
			lastOpen = obs
		}
		select {
		case <-ctx.Done():
		case <-time.After(env.pause):
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintf(stderr, "isolation gate: isolation not in place after %v (%d rounds); %s\n",
		s.Deadline, rounds, notInPlace(last, lastOpen, inARow, s.Rounds))
	return probewire.ExitFailed
}

// notInPlace says why the gate gave up: what the last round found
// reachable or, when the last rounds found everything blocked but too few
// of them in a row, what the last round with an opening found.
func notInPlace(last, lastOpen []gateObservation, inARow, need int) string {
	reachable := func(obs []gateObservation) string {
		var open []string
		for _, o := range obs {
			if !o.blocked() {
				open = append(open, o.attempt.String()+": "+o.observed+" ("+o.detail+")")
			}
		}
		return strings.Join(open, "; ")
	}
	switch {
	case last == nil:
		return "no round ended before the deadline"
	case !allBlocked(last):
		return "still reachable: " + reachable(last)
	case lastOpen == nil:
		return fmt.Sprintf("everything blocked in the last %d round(s), %d needed in a row", inARow, need)
	default:
		return fmt.Sprintf("everything blocked in the last %d round(s), %d needed in a row; reachable the round before: %s",
			inARow, need, reachable(lastOpen))
	}
}

// allBlocked says whether every observation of a round is blocked.
func allBlocked(obs []gateObservation) bool {
	for _, o := range obs {
		if !o.blocked() {
			return false
		}
	}
	return true
}

// summary lists what each attempt saw: "dns-udp 10.96.0.10:53 refused, ...".
func summary(obs []gateObservation) string {
	parts := make([]string, 0, len(obs))
	for _, o := range obs {
		parts = append(parts, o.attempt.String()+" "+o.observed)
	}
	return strings.Join(parts, ", ")
}

// gateMain is `check-probe gate ...` with the pod's environment.
func gateMain(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	s, err := parseGateArgs(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "isolation gate: bad arguments:", err)
		return probewire.ExitBadRequest
	}
	return runGate(ctx, s, gateEnv{
		getenv:     getenv,
		resolvConf: func() ([]byte, error) { return boundedfile.Read(resolvConf, maxResolvConfBytes) },
		now:        time.Now,
		pause:      gatePause,
	}, stdout, stderr)
}

// gatePause is the wait between two rounds: short, since a rejecting
// firewall answers each round in about a millisecond and the plugin waits
// for the gate.
const gatePause = 10 * time.Millisecond
