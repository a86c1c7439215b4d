package devstack

import (
	"net/netip"
	"strings"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// gateList is the isolation gate's targets as the operator's
// --isolation-gate-targets flag holds them.
type gateList []string

func (l gateList) String() string { return strings.Join(l, ",") }

// gateTargets are what the isolation gate of a plugin pod on the real node
// must find blocked (OF-42): the operator's defaults (the cluster DNS, the
// API server, the node's resolver) and, because a plugin must reach none of
// them directly either, the node's registries and the institutions'
// stand-ins, by address.
func (s *Stack) gateTargets() gateList {
	list := gateList{plugins.DefaultGateTargets}
	add := func(hostport string) {
		// A loopback address is the pod's own, which says nothing.
		if ap, err := netip.ParseAddrPort(hostport); err == nil && !ap.Addr().IsLoopback() {
			list = append(list, "tcp="+ap.String())
		}
	}
	if s.Cluster != nil {
		add(s.Cluster.NodeRegistry())
	}
	add(s.RegistryHost)
	if s.FakeNBP != nil {
		add(s.FakeNBP.Addr())
	}
	return list
}
