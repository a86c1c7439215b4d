package check

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/arkadiuss/openfief/internal/check/probewire"
)

// GroupIsolation holds `openfief check --isolation`: one result per cell of
// the truth table the probes measured (OF-29).
const GroupIsolation = "isolation"

// Observations a probe reports for a cell (probewire's vocabulary).
const (
	ObservedOpen     = probewire.ObservedOpen
	ObservedAnswered = probewire.ObservedAnswered
	ObservedRefused  = probewire.ObservedRefused
	ObservedTimeout  = probewire.ObservedTimeout
	ObservedError    = probewire.ObservedError
)

// Expectation is what a cell must observe when plugins are isolated.
type Expectation string

const (
	// ExpectBlocked is refused or timed out; neither open nor answered.
	ExpectBlocked Expectation = "blocked"
	// ExpectOpen is: the TCP connection is accepted.
	ExpectOpen Expectation = "open"
	// ExpectProxyAuthRequired is: the proxy answers 407 (no credentials).
	ExpectProxyAuthRequired Expectation = "status 407"
	// ExpectProxyForbidden is: the proxy answers 403 (not on the allow-list).
	ExpectProxyForbidden Expectation = "status 403"
	// ExpectProxyAdmitted is: the proxy authenticated and authorised the
	// tunnel: 200 (opened), or 502 (it then could not resolve or reach
	// the host, which says nothing of isolation: a cluster without
	// internet access answers so).
	ExpectProxyAdmitted Expectation = "admitted (200 or 502)"
)

// The probe kinds the cells use (probewire's).
const (
	KindTCP          = probewire.KindTCP
	KindDNSUDP       = probewire.KindDNSUDP
	KindDNSTCP       = probewire.KindDNSTCP
	KindProxyNoToken = probewire.KindProxyNoToken
	KindProxyToken   = probewire.KindProxyToken
)

// The two probes: A, granted everything its manifest asks, runs every cell
// but one; B, another plugin, tries to reach A.
const (
	ProbeA = "a"
	ProbeB = "b"
)

// Cell is one row of the isolation truth table: which probe tries what,
// and what it must observe.
type Cell struct {
	// Name says what is tried, from the plugin's side ("plugin → API server").
	Name string `json:"name"`
	// From is the probe that tries it: ProbeA or ProbeB.
	From string `json:"from"`
	// Kind is how: KindTCP, KindDNSUDP, ...
	Kind probewire.Kind `json:"kind"`
	// Target is host:port for the connection (empty for the proxy kinds:
	// the probe uses its HTTPS_PROXY).
	Target string `json:"target,omitempty"`
	// Host is the proxy kinds' CONNECT target, host:port.
	Host string `json:"host,omitempty"`
	// Query is the DNS kinds' name.
	Query string `json:"query,omitempty"`
	// Expect is what an isolated plugin observes.
	Expect Expectation `json:"expected"`
	// Meaning says what a differing observation means for the owner.
	Meaning string `json:"-"`
}

// Targets are the addresses the cells try, read from the cluster.
type Targets struct {
	// ClusterDNS is the cluster DNS Service's address (ClusterIP:53).
	ClusterDNS string
	// NodeResolver is the address a node's resolver listens on, as a pod
	// sees it: the probe pod's host IP, port 53.
	NodeResolver string
	// Outside is an address outside the cluster (host:port).
	Outside string
	// APIServer is the kubernetes Service (ClusterIP:443).
	APIServer string
	// OtherProbe is probe B's pod address and plugin port; ProbeA is A's,
	// which B tries.
	OtherProbe, ProbeA string
	// CorePlugin and CoreOwner are the core pod's plugin API and owner API
	// addresses.
	CorePlugin, CoreOwner string
	// GrantedHost is the host:port probe A's grant lets it reach through
	// the proxy; DeniedHost one it does not.
	GrantedHost, DeniedHost string
	// DNSQuery is the name the DNS cells ask for.
	DNSQuery string
}

// Meanings shared by several cells.
const (
	meaningNoEnforcement = "your network plugin does not enforce NetworkPolicy: plugins can reach the internet directly, with no allow-list"
)

// IsolationCells is the truth table the probes measure, in the order it is
// printed: what a plugin must not reach, what it must reach, and how the
// egress proxy answers it.
func IsolationCells(t Targets) []Cell {
	return []Cell{
		{Name: "plugin → cluster DNS, UDP", From: ProbeA, Kind: KindDNSUDP, Target: t.ClusterDNS, Query: t.DNSQuery, Expect: ExpectBlocked,
			Meaning: "plugins can query the cluster DNS: names can leak data out (DNS tunnelling) past the egress proxy"},
		{Name: "plugin → cluster DNS, TCP", From: ProbeA, Kind: KindDNSTCP, Target: t.ClusterDNS, Query: t.DNSQuery, Expect: ExpectBlocked,
			Meaning: "plugins can query the cluster DNS over TCP: names can leak data out past the egress proxy"},
		{Name: "plugin → node's resolver", From: ProbeA, Kind: KindDNSUDP, Target: t.NodeResolver, Query: t.DNSQuery, Expect: ExpectBlocked,
			Meaning: "plugins can query a resolver on their node: names can leak data out past the egress proxy"},
		{Name: "plugin → address outside the cluster", From: ProbeA, Kind: KindTCP, Target: t.Outside, Expect: ExpectBlocked,
			Meaning: meaningNoEnforcement},
		{Name: "plugin → API server", From: ProbeA, Kind: KindTCP, Target: t.APIServer, Expect: ExpectBlocked,
			Meaning: "plugins can reach the Kubernetes API server"},
		{Name: "plugin → other plugin", From: ProbeA, Kind: KindTCP, Target: t.OtherProbe, Expect: ExpectBlocked,
			Meaning: "plugins can reach each other: one plugin can call another's API"},
		{Name: "other plugin → plugin", From: ProbeB, Kind: KindTCP, Target: t.ProbeA, Expect: ExpectBlocked,
			Meaning: "plugins can reach each other: one plugin can call another's API"},
		{Name: "plugin → core's plugin API", From: ProbeA, Kind: KindTCP, Target: t.CorePlugin, Expect: ExpectOpen,
			Meaning: "plugins cannot reach openfief-core: connectors cannot deliver; the core's NetworkPolicy or the plugins' egress rule is wrong"},
		{Name: "plugin → core's owner API", From: ProbeA, Kind: KindTCP, Target: t.CoreOwner, Expect: ExpectBlocked,
			Meaning: "plugins can reach the core's owner API port, which only the API server may reach"},
		{Name: "plugin → egress proxy, no token", From: ProbeA, Kind: KindProxyNoToken, Host: t.GrantedHost, Expect: ExpectProxyAuthRequired,
			Meaning: "the egress proxy does not demand a plugin's token: anyone reaching it can leave the cluster"},
		{Name: "plugin → egress proxy, host not granted", From: ProbeA, Kind: KindProxyToken, Host: t.DeniedHost, Expect: ExpectProxyForbidden,
			Meaning: "the egress proxy lets a plugin reach a host its grant does not name"},
		{Name: "plugin → egress proxy, granted host", From: ProbeA, Kind: KindProxyToken, Host: t.GrantedHost, Expect: ExpectProxyAdmitted,
			Meaning: "the egress proxy refuses a host the plugin's grant names: plugins cannot reach their institutions"},
	}
}

// AtStartPrefix starts the name of every at-start cell.
const AtStartPrefix = "at start: "

// AtStartCells are the cells probe A tries from its first instruction,
// again and again for a few seconds (OF-42): each cell of IsolationCells
// that must be blocked and whose target is known before the probes run (the
// node's resolver and the other probe are not), named with AtStartPrefix.
// One attempt that reached its target during that window fails the cell:
// a plugin's isolation must hold from its first packet, not only once it
// has settled.
func AtStartCells(t Targets) []Cell {
	var out []Cell
	for _, c := range IsolationCells(t) {
		if c.From != ProbeA || c.Expect != ExpectBlocked || c.Target == "" {
			continue
		}
		if c.Target == t.NodeResolver || c.Target == t.OtherProbe {
			continue
		}
		c.Name = AtStartPrefix + c.Name
		c.Meaning = "in its first seconds, before its isolation was in force, " + c.Meaning +
			" (is the operator's isolation gate turned off? See docs/operator.md)" // OF-42
		out = append(out, c)
	}
	return out
}

// Matches reports whether observed is what e expects.
func (e Expectation) Matches(observed string) bool {
	switch e {
	case ExpectBlocked:
		return observed == ObservedRefused || observed == ObservedTimeout
	case ExpectOpen:
		return observed == ObservedOpen
	}
	code, isStatus := probewire.ObservedStatus(observed)
	switch e {
	case ExpectProxyAdmitted:
		return isStatus && (code == http.StatusOK || code == http.StatusBadGateway)
	case ExpectProxyAuthRequired:
		return isStatus && code == http.StatusProxyAuthRequired
	case ExpectProxyForbidden:
		return isStatus && code == http.StatusForbidden
	}
	return false
}

// Row is one measured cell.
type Row struct {
	Cell
	// Observed is what the probe saw; Detail its words on it (bounded,
	// shown escaped).
	Observed string `json:"observed"`
	Detail   string `json:"detail,omitempty"`
	// OK says whether Observed is what the cell expects.
	OK bool `json:"ok"`
}

// Measure pairs each cell with its observation (ObservedError with "not
// measured" when there is none).
func Measure(cells []Cell, observed map[string]Observation) []Row {
	rows := make([]Row, 0, len(cells))
	for _, c := range cells {
		o, ok := observed[c.Name]
		if !ok {
			o = Observation{Observed: ObservedError, Detail: "not measured"}
		}
		rows = append(rows, Row{Cell: c, Observed: o.Observed, Detail: o.Detail, OK: c.Expect.Matches(o.Observed)})
	}
	return rows
}

// Observation is what a probe saw of one cell.
type Observation struct {
	Observed string
	Detail   string
}

// Isolation decides the results of a measured truth table (the table
// itself is printed by WriteTable): one failure per cell that differs,
// with what it means, and when every cell that must be blocked is open one
// more saying the network plugin enforces no NetworkPolicy at all; one
// passed result when every cell is as expected.
func Isolation(rows []Row) []Result {
	var out []Result
	blocked, leaked := 0, 0
	for _, r := range rows {
		if r.Expect == ExpectBlocked {
			blocked++
			if r.Observed == ObservedOpen || r.Observed == ObservedAnswered {
				leaked++
			}
		}
		if r.OK {
			continue
		}
		observed := r.Observed
		if r.Detail != "" {
			observed += " (" + r.Detail + ")"
		}
		out = append(out, fail(GroupIsolation, r.Name, fmt.Sprintf("expected %s, observed %s: %s", r.Expect, observed, r.Meaning), isolationHint(r)))
	}
	if blocked > 0 && leaked == blocked {
		out = append(out, fail(GroupIsolation, IsolationEnforcedName, meaningNoEnforcement+" (no cell that must be blocked was)",
			"use a network plugin that enforces NetworkPolicy (Calico, Cilium, kube-router, Antrea; flannel alone does not), then run this check again (docs/operator.md)"))
	}
	if len(out) == 0 {
		out = append(out, ok(GroupIsolation, IsolationEnforcedName, fmt.Sprintf("all %d cells as expected", len(rows))))
	}
	return out
}

// IsolationEnforcedName is the name of the isolation group's summary result.
const IsolationEnforcedName = "NetworkPolicy enforced"

// IsolationNotRun is the isolation result when the probes could not run.
func IsolationNotRun(reason string) Result {
	return fail(GroupIsolation, IsolationEnforcedName, "not measured: "+reason, "fix what failed above, then run openfief check --isolation again")
}

// isolationHint says where to look for a cell that differs.
func isolationHint(r Row) string {
	switch {
	case r.Observed == ObservedError:
		return "the probe could not try this cell; see the detail, and run the check again"
	case r.Kind == KindProxyNoToken || r.Kind == KindProxyToken:
		return "check the egress proxy (openfief check without --isolation, its logs) and the allow-list ConfigMap"
	case r.Expect == ExpectOpen:
		return "compare the NetworkPolicy openfief-core with deploy/core/networkpolicy.yaml (its ingress from plugins on the plugin port)"
	}
	return "check that your network plugin enforces NetworkPolicy and that the platform's policies are as installed (kubectl -n openfief get networkpolicy)"
}

// HostPort joins a host and a port.
func HostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// Differing names the cells that differ, for the error line.
func Differing(rows []Row) []string {
	var out []string
	for _, r := range rows {
		if !r.OK {
			out = append(out, r.Name)
		}
	}
	return out
}

// IsolationSummary is the error line of a failed isolation check.
func IsolationSummary(rows []Row) string {
	d := Differing(rows)
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("isolation: %d of %d cells differ: %s", len(d), len(rows), strings.Join(d, "; "))
}
