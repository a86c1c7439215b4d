//go:build cluster

package realnode

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/test/netpolicy"
)

// engineCells maps the packet cells that NetworkPolicies alone decide to the
// reference engine's cells (test/netpolicy). The proxy tunnels (the proxy's
// allow-list, not a policy), the core's calls (the core runs in the test
// process, so they come from the node, which real CNIs always let into its
// pods and which the engine does not model) and the node's controls are not
// policy verdicts and have no engine cell.
var engineCells = map[string]string{
	"plugin -> egress proxy Service":     "plugin → egress proxy",
	"plugin -> NBP stand-in, direct":     "plugin → NBP stand-in, direct",
	"plugin -> cluster DNS Service, UDP": "plugin → cluster DNS, UDP",
	"plugin -> cluster DNS Service, TCP": "plugin → cluster DNS, TCP",
	"plugin -> DNS on the node, UDP":     "plugin → resolver on the node, UDP",
	"plugin -> DNS on the node, TCP":     "plugin → resolver on the node, TCP",
	"plugin -> other plugin":             "plugin → other plugin",
	"other plugin -> plugin":             "other plugin → plugin",
}

// packetVerdict reads a probe's answer as a policy verdict.
func packetVerdict(got string) (netpolicy.Verdict, bool) {
	switch got {
	case "open":
		return netpolicy.Allowed, true
	case "refused":
		return netpolicy.Refused, true
	}
	return "", false
}

// expectEngineAgrees computes the truth table with the reference engine from
// the NetworkPolicies the API server holds, in a world of the real pods and
// addresses (plugin a and b, the proxy, the stand-in and the resolver on the
// node's bridge address), prints it, and fails naming every cell where what
// the packets did (got, by packet cell name) and the engine disagree.
func expectEngineAgrees(t *testing.T, stack *devstack.Stack, cs kubernetes.Interface, a, b *corev1.Pod, nbpPort int, got map[string]string) {
	t.Helper()
	ctx := t.Context()
	list, err := cs.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policies := make([]*networkingv1.NetworkPolicy, 0, len(list.Items))
	for i := range list.Items {
		policies = append(policies, &list.Items[i])
	}
	w, err := realWorld(ctx, cs, stack, a, b, nbpPort)
	if err != nil {
		t.Fatal(err)
	}
	table, err := netpolicy.Compute(w, policies)
	if err != nil {
		t.Fatalf("the reference engine: %v", err)
	}
	var packets, engine netpolicy.Table
	for packetName, cellName := range engineCells {
		row, ok := table.Lookup(cellName)
		if !ok {
			t.Errorf("the engine has no cell %q", cellName)
			continue
		}
		v, ok := packetVerdict(got[packetName])
		if !ok {
			t.Errorf("%s: the packets gave %q, not open or refused", packetName, got[packetName])
			continue
		}
		engine = append(engine, row)
		packets = append(packets, netpolicy.Row{Cell: row.Cell, Verdict: v})
	}
	sortRows(engine)
	sortRows(packets)
	t.Logf("the reference engine (cyclonus) on the cluster's %d NetworkPolicies:\n%s", len(policies), engine)
	for _, d := range engine.Diff(packets) {
		t.Errorf("packets and the reference engine disagree: %s", d)
	}
}

// sortRows orders rows by cell name, so both tables print alike.
func sortRows(t netpolicy.Table) {
	slices.SortFunc(t, func(x, y netpolicy.Row) int { return strings.Compare(x.Cell.Name, y.Cell.Name) })
}

// realWorld places every role of the truth table: plugin a and b as the
// pods they are; the egress proxy, the cluster DNS Service's endpoint, the
// resolver, the NBP stand-in and the API server at the node's bridge
// address, where this test runs them; and, for roles the real node has no
// pod for (the core and a look-alike, another openfief pod), pods labelled
// as the real objects would be, so the table is whole. Only the cells in
// engineCells are compared.
func realWorld(ctx context.Context, cs kubernetes.Interface, stack *devstack.Stack, a, b *corev1.Pod, nbpPort int) (netpolicy.World, error) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, plugins.Namespace, metav1.GetOptions{})
	if err != nil {
		return netpolicy.World{}, err
	}
	core, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, operator.DefaultCoreService, metav1.GetOptions{})
	if err != nil {
		return netpolicy.World{}, err
	}
	proxy, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, operator.DefaultProxyService, metav1.GetOptions{})
	if err != nil {
		return netpolicy.World{}, err
	}
	cluster, err := operator.ClusterFromServices(core, proxy, operator.DefaultCorePort, operator.DefaultProxyPort)
	if err != nil {
		return netpolicy.World{}, err
	}
	gw := netpolicy.AddressPeer(stack.Cluster.NodeGateway().String())
	elsewhere := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Labels: map[string]string{corev1.LabelMetadataName: "elsewhere"}}}
	pod := func(ns *corev1.Namespace, labels map[string]string, ip string) netpolicy.Peer {
		return netpolicy.PodPeer(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Labels: labels},
			Status:     corev1.PodStatus{PodIP: ip},
		}, ns)
	}
	// Addresses no pod of the node has (TEST-NET-2), for the made-up pods.
	const made = "198.51.100."
	return netpolicy.World{
		Peers: map[netpolicy.Role]netpolicy.Peer{
			netpolicy.Plugin:        netpolicy.PodPeer(a, ns),
			netpolicy.OtherPlugin:   netpolicy.PodPeer(b, ns),
			netpolicy.Core:          pod(ns, cluster.CoreSelector, made+"13"),
			netpolicy.CoreLookalike: pod(elsewhere, cluster.CoreSelector, made+"16"),
			netpolicy.NamespacePod:  pod(ns, map[string]string{"app.kubernetes.io/name": "openfief-operator"}, made+"15"),
			netpolicy.EgressProxy:   gw,
			netpolicy.ClusterDNS:    gw,
			netpolicy.NodeResolver:  gw,
			netpolicy.NBPStandIn:    gw,
			netpolicy.APIServer:     gw,
			netpolicy.Internet:      netpolicy.AddressPeer("203.0.113.10"),
		},
		Ports: netpolicy.Ports{
			Plugin:     plugins.DefaultPluginPort,
			Core:       cluster.Topology.CorePodPort,
			Proxy:      cluster.Topology.ProxyPodPort,
			APIServer:  6443,
			NBPStandIn: nbpPort,
		},
	}, nil
}

// portOf is the port of a host:port address.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
