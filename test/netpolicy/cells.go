package netpolicy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Verdict is what happens to a connection: Allowed or Refused.
type Verdict string

// The two verdicts of a cell.
const (
	Allowed Verdict = "allowed"
	Refused Verdict = "refused"
)

// Cell is one connection of the truth table: from a role to a role, on a
// protocol and port.
type Cell struct {
	// Name identifies the cell in tables and diffs; it is stable across
	// worlds (the port is not part of it).
	Name     string
	From, To Role
	Protocol corev1.Protocol
	Port     int
}

// String is the cell's connection, e.g. "plugin → cluster-dns UDP/53".
func (c Cell) String() string {
	return fmt.Sprintf("%s → %s %s/%d", c.From, c.To, c.Protocol, c.Port)
}

// port picks a cell's port from the world's Ports.
type port func(Ports) int

func pluginPort(p Ports) int     { return p.Plugin }
func notPluginPort(p Ports) int  { return p.Plugin + 1 }
func corePort(p Ports) int       { return p.Core }
func coreOwnerPort(p Ports) int  { return p.CoreOwner }
func proxyPort(p Ports) int      { return p.Proxy }
func apiServerPort(p Ports) int  { return p.APIServer }
func nbpStandInPort(p Ports) int { return p.NBPStandIn }
func httpsPort(Ports) int        { return 443 }
func dnsPort(Ports) int          { return 53 }
func unusedPort(Ports) int       { return 9999 }

const (
	tcp = corev1.ProtocolTCP
	udp = corev1.ProtocolUDP
)

// table is the isolation truth table of the platform, in the order it is
// printed: what a plugin may reach (D-32: no DNS, nothing direct, only the
// core and, with egress, the proxy), who may reach a plugin (D-59: only the
// core, on the serving port), and the egress proxy's own fence.
var table = []struct {
	name     string
	from, to Role
	protocol corev1.Protocol
	port     port
	want     Verdict
}{
	// From inside a plugin pod.
	{"plugin → cluster DNS, UDP", Plugin, ClusterDNS, udp, dnsPort, Refused},
	{"plugin → cluster DNS, TCP", Plugin, ClusterDNS, tcp, dnsPort, Refused},
	{"plugin → resolver on the node, UDP", Plugin, NodeResolver, udp, dnsPort, Refused},
	{"plugin → resolver on the node, TCP", Plugin, NodeResolver, tcp, dnsPort, Refused},
	{"plugin → NBP stand-in, direct", Plugin, NBPStandIn, tcp, nbpStandInPort, Refused},
	{"plugin → internet, direct", Plugin, Internet, tcp, httpsPort, Refused},
	{"plugin → API server", Plugin, APIServer, tcp, apiServerPort, Refused},
	{"plugin → egress proxy", Plugin, EgressProxy, tcp, proxyPort, Allowed},
	{"plugin → core", Plugin, Core, tcp, corePort, Allowed},
	{"plugin → core owner port", Plugin, Core, tcp, coreOwnerPort, Refused},
	{"plugin → other plugin", Plugin, OtherPlugin, tcp, pluginPort, Refused},
	// Into a plugin pod.
	{"core → plugin serving port", Core, Plugin, tcp, pluginPort, Allowed},
	{"core → plugin, another port", Core, Plugin, tcp, notPluginPort, Refused},
	{"other plugin → plugin", OtherPlugin, Plugin, tcp, pluginPort, Refused},
	{"openfief pod (not the core) → plugin", NamespacePod, Plugin, tcp, pluginPort, Refused},
	{"core look-alike in another namespace → plugin", CoreLookalike, Plugin, tcp, pluginPort, Refused},
	{"egress proxy → plugin", EgressProxy, Plugin, tcp, pluginPort, Refused},
	// A plugin without egress.
	{"other plugin (no egress) → egress proxy", OtherPlugin, EgressProxy, tcp, proxyPort, Refused},
	{"other plugin → core", OtherPlugin, Core, tcp, corePort, Allowed},
	{"core → other plugin serving port", Core, OtherPlugin, tcp, pluginPort, Allowed},
	// The egress proxy's fence (deploy/egress-proxy/networkpolicy.yaml).
	{"egress proxy → internet, HTTPS", EgressProxy, Internet, tcp, httpsPort, Allowed},
	{"egress proxy → cluster DNS, UDP", EgressProxy, ClusterDNS, udp, dnsPort, Allowed},
	{"egress proxy → cluster DNS, TCP", EgressProxy, ClusterDNS, tcp, dnsPort, Allowed},
	{"egress proxy → API server", EgressProxy, APIServer, tcp, apiServerPort, Allowed},
	{"egress proxy → NBP stand-in (private address)", EgressProxy, NBPStandIn, tcp, nbpStandInPort, Refused},
	{"egress proxy → core", EgressProxy, Core, tcp, corePort, Refused},
	{"egress proxy → a pod in another namespace, other port", EgressProxy, CoreLookalike, tcp, unusedPort, Refused},
	// The API server rule admits 443 and 6443 to any address (the manifest
	// says so: narrow it with an ipBlock where the address is known).
	{"egress proxy → a pod in another namespace, TCP 443", EgressProxy, CoreLookalike, tcp, httpsPort, Allowed},
	{"openfief pod (not a plugin) → egress proxy", NamespacePod, EgressProxy, tcp, proxyPort, Refused},
	{"core → egress proxy", Core, EgressProxy, tcp, proxyPort, Refused},
	{"core look-alike in another namespace → egress proxy", CoreLookalike, EgressProxy, tcp, proxyPort, Refused},
	// The core's owner API (deploy/core/networkpolicy.yaml): the API
	// server's service proxy alone, at the address the install names.
	{"API server → core owner port", APIServer, Core, tcp, coreOwnerPort, Allowed},
	{"core look-alike in another namespace → core owner port", CoreLookalike, Core, tcp, coreOwnerPort, Refused},
	{"openfief pod (not a plugin) → core owner port", NamespacePod, Core, tcp, coreOwnerPort, Refused},
}

// Cells are the truth table's connections on ports p, in table order.
func Cells(p Ports) []Cell {
	out := make([]Cell, 0, len(table))
	for _, r := range table {
		out = append(out, Cell{Name: r.name, From: r.from, To: r.to, Protocol: r.protocol, Port: r.port(p)})
	}
	return out
}

// Expected is the truth table the platform promises, on ports p.
func Expected(p Ports) Table {
	cells := Cells(p)
	out := make(Table, 0, len(cells))
	for i, c := range cells {
		out = append(out, Row{Cell: c, Verdict: table[i].want})
	}
	return out
}
