// Command coredns is CoreDNS at the version go.mod pins with only the
// plugins the local real node's cluster DNS uses: kubernetes (Services and
// their endpoints, from the API), forward (names outside the cluster, to
// the node's resolver, as a real cluster's DNS does: the egress proxy's pods
// resolve the hosts a grant names through it), cache, errors, health, ready
// and loop. Plugins never reach it: their NetworkPolicies refuse DNS.
// hack/build-node.sh builds it; the upstream main (coredns.go) links
// every plugin. `coredns -plugins` also lists metadata, prometheus and
// transfer, which the kubernetes plugin links: with no directive of theirs
// below, a Corefile cannot turn them on.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins; each registers its directive.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order a request passes the plugins in: upstream's order
	// (core/dnsserver/zdirectives.go), restricted to those linked here.
	dnsserver.Directives = []string{"ready", "health", "errors", "cache", "kubernetes", "loop", "forward"}
}

func main() {
	coremain.Run()
}
