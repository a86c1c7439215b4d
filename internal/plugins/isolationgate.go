package plugins

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The isolation gate (OF-42) is an init container the operator puts before
// every plugin's container: from inside the pod's network namespace it tries
// what a plugin must never reach, and exits only once every attempt is
// refused or unanswered, so the plugin's first instruction runs after its
// NetworkPolicies are in force on the node, whatever the network plugin.
// These are the names the operator (which writes the gate's arguments) and
// the gate (which parses them) share.
const (
	// GateContainerName is the init container's name.
	GateContainerName = "isolation-gate"
	// GateVerb is the probe program's sub-command that runs the gate:
	// `/check-probe gate [flags] TARGET...`.
	GateVerb = "gate"
	// EnvNodeIP carries the pod's node address (the downward API's
	// status.hostIP) into the gate, for GateNodeDNS.
	EnvNodeIP = "OPENFIEF_NODE_IP"
	// EnvAPIServerHost and EnvAPIServerPort are the kubernetes Service's
	// address, which the kubelet gives every container even without service
	// links; GateAPIServer reads them.
	EnvAPIServerHost = "KUBERNETES_SERVICE_HOST"
	EnvAPIServerPort = "KUBERNETES_SERVICE_PORT"
)

// Classes of gate target: names the gate expands inside the pod, so the
// operator need not know the addresses.
const (
	// GateClusterDNS is port 53 of every nameserver of the pod's
	// /etc/resolv.conf (the cluster DNS), over TCP.
	GateClusterDNS = "cluster-dns"
	// GateAPIServer is the API server's Service (EnvAPIServerHost and
	// EnvAPIServerPort).
	GateAPIServer = "api-server"
	// GateNodeDNS is port 53 of the pod's node (EnvNodeIP), over TCP: the
	// node's resolver, where it has one.
	GateNodeDNS = "node-dns"
)

// GateKind is how one gate target is tried.
type GateKind string

// GateTCP is the one kind of explicit gate target: it opens a TCP
// connection and closes it at once, sending nothing. The gate sends no datagram: an
// answered one leaves the node's connection tracking an established flow
// for its address and port, which the plugin could reuse, past its policy,
// for as long as the entry lives (30 s and more; OF-42). A TCP connection
// the gate closed is over: a new one from the same port is a new flow, which
// the policy judges.
const GateTCP GateKind = "tcp"

// GateTarget is one thing the gate must find blocked: a class it expands
// itself, or an explicit kind and address.
type GateTarget struct {
	// Class is one of the Gate* classes; empty for an explicit target.
	Class string
	// Kind and Address name an explicit target: an IP literal and port.
	Kind    GateKind
	Address netip.AddrPort
}

// String is the target's command-line form, which ParseGateTarget reads:
// a class, or kind=address ("tcp=203.0.113.7:443", "tcp=[2001:db8::1]:53").
func (t GateTarget) String() string {
	if t.Class != "" {
		return t.Class
	}
	return string(t.Kind) + "=" + t.Address.String()
}

// ErrInvalidGateTarget is wrapped by every refusal of ParseGateTarget.
var ErrInvalidGateTarget = errors.New("invalid isolation gate target")

// maxGateTargetBytes bounds one target's text.
const maxGateTargetBytes = 64

// ParseGateTarget reads a target's command-line form (GateTarget.String).
// An explicit target names an IP literal, never a host name: the gate must
// not need DNS, which is the first thing it expects to find blocked.
func ParseGateTarget(s string) (GateTarget, error) {
	if len(s) > maxGateTargetBytes {
		return GateTarget{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidGateTarget, maxGateTargetBytes)
	}
	switch s {
	case GateClusterDNS, GateAPIServer, GateNodeDNS:
		return GateTarget{Class: s}, nil
	}
	kind, addr, ok := strings.Cut(s, "=")
	if !ok {
		return GateTarget{}, fmt.Errorf("%w: %q is neither %s, %s nor %s, nor tcp=IP:PORT", ErrInvalidGateTarget, s, GateClusterDNS, GateAPIServer, GateNodeDNS)
	}
	if GateKind(kind) != GateTCP {
		return GateTarget{}, fmt.Errorf("%w: kind %q: want %s (the gate sends no datagram)", ErrInvalidGateTarget, kind, GateTCP)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return GateTarget{}, fmt.Errorf("%w: %q: want an IP literal and a port, like 203.0.113.7:443 or [2001:db8::1]:53", ErrInvalidGateTarget, addr)
	}
	return GateTarget{Kind: GateKind(kind), Address: ap}, nil
}

// ParseGateTargets reads a comma-separated list of targets, as the
// operator's --isolation-gate-targets flag holds it, into a sorted list
// without duplicates. An empty list is refused: a gate that tries nothing
// would prove nothing.
func ParseGateTargets(list string) ([]GateTarget, error) {
	var out []GateTarget
	for part := range strings.SplitSeq(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		t, err := ParseGateTarget(part)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no target", ErrInvalidGateTarget)
	}
	slices.SortFunc(out, func(a, b GateTarget) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(out, func(a, b GateTarget) bool { return a.String() == b.String() }), nil
}

// DefaultGateTargets are the targets the operator's gate tries unless told
// otherwise: the cluster DNS, the API server and the node's resolver. Each
// answers a pod without policy on an ordinary cluster, so finding all of
// them blocked says the pod's policy is in force (OF-42).
const DefaultGateTargets = GateAPIServer + "," + GateClusterDNS + "," + GateNodeDNS

// The gate's timing: the flags of `/check-probe gate` and the operator's.
const (
	// DefaultGateAttemptTimeout is how long one attempt waits for a TCP
	// connection before it counts as unanswered (a dropping firewall, or a
	// rejecting one whose ICMP errors the kernel rate-limits). A peer's
	// kernel answers a SYN within a millisecond on a cluster network, so a
	// target slower than this is taken for blocked only under a load that
	// stalls the cluster.
	DefaultGateAttemptTimeout = 500 * time.Millisecond
	// DefaultGateRounds is how many rounds in a row must find every target
	// blocked.
	DefaultGateRounds = 2
	// DefaultGateDeadline is how long the gate waits for isolation before it
	// fails the pod with the targets that still answer; the kubelet then
	// runs it again with its back-off.
	DefaultGateDeadline = time.Minute
	// MaxGateDeadline bounds --deadline.
	MaxGateDeadline = 10 * time.Minute
	// MaxGateTargets bounds how many targets one gate tries after expansion.
	MaxGateTargets = 32
)

// GateSettings is how the gate tries its targets: what the operator passes
// as flags, and what the gate parses back (ParseGateArgs).
type GateSettings struct {
	// Targets are tried each round, concurrently.
	Targets []GateTarget
	// AttemptTimeout bounds one attempt (DefaultGateAttemptTimeout).
	AttemptTimeout time.Duration
	// Rounds in a row must find everything blocked (DefaultGateRounds).
	Rounds int
	// Deadline bounds the whole wait (DefaultGateDeadline).
	Deadline time.Duration
}

// DefaultGateSettings is the gate with DefaultGateTargets and the default
// timing.
func DefaultGateSettings() GateSettings {
	targets, err := ParseGateTargets(DefaultGateTargets)
	if err != nil {
		panic(err) // a constant
	}
	return GateSettings{Targets: targets, AttemptTimeout: DefaultGateAttemptTimeout, Rounds: DefaultGateRounds, Deadline: DefaultGateDeadline}
}

// Validate checks the settings' bounds, naming the setting.
func (g GateSettings) Validate() error {
	switch {
	case len(g.Targets) == 0:
		return fmt.Errorf("isolation gate: targets: at least one is needed")
	case len(g.Targets) > MaxGateTargets:
		return fmt.Errorf("isolation gate: targets: at most %d", MaxGateTargets)
	case g.AttemptTimeout < 50*time.Millisecond || g.AttemptTimeout > 10*time.Second:
		return fmt.Errorf("isolation gate: attempt timeout %v: want 50ms to 10s", g.AttemptTimeout)
	case g.Rounds < 1 || g.Rounds > 10:
		return fmt.Errorf("isolation gate: rounds %d: want 1 to 10", g.Rounds)
	case g.Deadline < g.AttemptTimeout || g.Deadline > MaxGateDeadline:
		return fmt.Errorf("isolation gate: deadline %v: want from the attempt timeout to %v", g.Deadline, MaxGateDeadline)
	}
	return nil
}

// Args are the gate's arguments after the program: the verb, the flags and
// the targets, in a fixed order.
func (g GateSettings) Args() []string {
	args := []string{
		GateVerb,
		"--timeout=" + g.AttemptTimeout.String(),
		"--rounds=" + strconv.Itoa(g.Rounds),
		"--deadline=" + g.Deadline.String(),
	}
	for _, t := range g.Targets {
		args = append(args, t.String())
	}
	return args
}
