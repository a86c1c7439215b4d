package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// routerStopGrace bounds how long kube-router may take to exit after
// SIGTERM, as at Stop.
const routerStopGrace = 10 * time.Second

// StopNetworkPolicy takes the real node's NetworkPolicy controller away:
// it stops kube-router's firewall (SIGTERM, SIGKILL after 10 s or ctx's
// deadline) and removes every chain, jump and ipset it left, so nothing
// polices the pods any more: each reaches every other pod, the node and the
// Services, whatever the NetworkPolicies say, as on a cluster whose network
// plugin does not enforce NetworkPolicy. The rest of the node runs on
// (kube-proxy's tables, the CNI, DNS). It is for proving that a check
// notices an unenforced policy (`openfief check --isolation`);
// StartNetworkPolicy brings the controller back. Calling it again only
// removes the rules again. It must not run concurrently with Stop; Stop
// cleans up whether the controller runs or not.
func (n *Node) StopNetworkPolicy(ctx context.Context) error {
	if i := n.procIndex(kubeRouterBin); i >= 0 {
		grace := routerStopGrace
		if d, ok := ctx.Deadline(); ok {
			grace = max(min(grace, time.Until(d)), 0)
		}
		n.procs[i].Stop(grace)
		// Out of the node's processes: waitFor would take its exit for a
		// failure, and Stop has nothing left to stop.
		n.procs = slices.Delete(n.procs, i, i+1)
	}
	// kube-router v2.1.0 leaves its rules on exit, and its --cleanup-config
	// panics (docs/node.md): cleanup's own removal, which touches only its
	// chains and ipsets, not kube-proxy's nft tables.
	if err := removeRouterRules(); err != nil {
		return fmt.Errorf("devcluster: removing kube-router's rules: %w", err)
	}
	return nil
}

// StartNetworkPolicy starts the real node's NetworkPolicy controller
// (kube-router's firewall) again with the arguments of the node's start,
// after StopNetworkPolicy, and returns once it enforces the cluster's
// NetworkPolicies again: its FORWARD chain is hooked in and it holds a chain
// for every NetworkPolicy (one per policy and sync, made in one
// iptables-restore with the pods' chains). With the controller running it
// only waits for that. Connections opened while nothing policed them stay
// open (their conntrack entries are ESTABLISHED, which kube-router accepts,
// as on any cluster where a policy arrives late); new ones are judged. It
// must not run concurrently with Stop.
func (n *Node) StartNetworkPolicy(ctx context.Context) error {
	i := n.procIndex(kubeRouterBin)
	if i >= 0 && n.procs[i].Exited() != nil {
		// It died by itself: start it anew, its rules are rebuilt.
		n.procs = slices.Delete(n.procs, i, i+1)
		i = -1
	}
	if i < 0 {
		if err := n.startKubeRouter(); err != nil {
			return err
		}
	}
	cs := n.cp.Clientset
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return n.waitFor(ctx, "kube-router to enforce the NetworkPolicies again", func(ctx context.Context) (bool, error) {
		if !routerHooked() {
			return false, nil
		}
		policies, err := cs.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		return policyChains() >= len(policies.Items), nil
	})
}

// procIndex returns the index in n.procs of the process called name, or -1.
func (n *Node) procIndex(name string) int {
	return slices.IndexFunc(n.procs, func(p *proc.Process) bool { return p.Name == name })
}

// policyChains counts kube-router's chains of NetworkPolicies in the IPv4
// filter table: KUBE-NWPLCY-*, except the default chain that every pod's
// chain ends in.
func policyChains() int {
	out, err := run("iptables", "-w", "-t", "filter", "-S")
	if err != nil {
		return 0
	}
	count := 0
	for _, line := range strings.Split(out, "\n") {
		if chain, ok := strings.CutPrefix(line, "-N KUBE-NWPLCY-"); ok && chain != "DEFAULT" {
			count++
		}
	}
	return count
}
