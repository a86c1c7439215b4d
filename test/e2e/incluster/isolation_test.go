//go:build cluster

package incluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/test/netpolicy"
)

// isolationCell is one measured row of the in-cluster truth table: what
// measure observes ("open", "refused", "timeout" or what went wrong), and
// the reference engine's cell it stands for (test/netpolicy), or "" for a
// control, which must be "open" to show that a refusal elsewhere is the
// policies' and not a missing server.
type isolationCell struct {
	name    string
	engine  string
	measure func() string
}

// elsewhereNamespace holds the core look-alike: a pod labelled as the core,
// outside openfief, under no NetworkPolicy of its own.
const elsewhereNamespace = "isolation-elsewhere"

// testIsolation checks the isolation truth table on the installed platform,
// with the core, the egress proxy and the cluster DNS as the pods they are.
// Two plugins run the probe (internal/devcluster/testdata/probe) under
// nbp-fx's manifest: probe-a with everything granted, probe-b under the
// same manifest without egress; a third pod of the probe, labelled as the core,
// runs in another namespace. The cells a pod can send are run from inside
// it (exec), as one connection or one datagram: the node's firewall refuses
// with an ICMP error, which the kernel rate-limits, so a DNS query (several
// datagrams and retries) from a plugin may see a timeout where the policy
// refuses; full queries are the controls, from the look-alike, which no
// policy confines. The core's image has no shell and nothing to run, so its cells
// are read from what it does: `openfief plugin status` reaches the owner
// API only through the API server's service proxy (API server → core owner
// port), and reports what the core met calling the plugin (core → plugin).
// Every cell that stands for one of the reference engine's is compared with
// the engine run on every NetworkPolicy the cluster holds (deploy/core's
// included), in a world of the real pods and addresses. It prints the
// table.
func testIsolation(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	cs := e.cs
	// probe-b's image asks for no egress: a first version granted less
	// than it asks for runs nothing (PlanRollout), so it cannot be probe-a's
	// image with egress left pending.
	m := nbpFxManifest(t, e.root)
	ref := e.preg.publish(t, "plugins/probe", m, map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	m.Egress = nil
	refB := e.preg.publish(t, "plugins/probe-no-egress", m, map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	for name, image := range map[string]plugins.ImageRef{"probe-a": ref, "probe-b": refB} {
		openfief(t, e.kubeconfig, "plugin", "install", name, "--image", image.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	}
	uninstallOnFailure(t, e, "probe-a", "probe-b")
	openfief(t, e.kubeconfig, "plugin", "approve", "probe-a", "--yes")
	openfief(t, e.kubeconfig, "plugin", "approve", "probe-b", "--yes")
	a := runningPluginPod(t, cs, "probe-a")
	b := runningPluginPod(t, cs, "probe-b")
	if env := containerEnv(b, "HTTPS_PROXY"); env != "" {
		t.Errorf("probe-b was granted no egress, yet its pod has HTTPS_PROXY=%s", env)
	}
	lookalike := startLookalike(t, cs, ref)

	core := platformPod(t, cs, plugins.Namespace, "app.kubernetes.io/name=openfief-core")
	proxyPod := platformPod(t, cs, plugins.Namespace, "app.kubernetes.io/name=openfief-egress-proxy")
	operatorPod := platformPod(t, cs, plugins.Namespace, "app.kubernetes.io/name=openfief-operator")
	dnsPod := platformPod(t, cs, metav1.NamespaceSystem, "k8s-app="+devcluster.ClusterDNSService)
	coreSvc, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, operator.DefaultCoreService, metav1.GetOptions{})
	must(t, err)
	proxySvc, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, operator.DefaultProxyService, metav1.GetOptions{})
	must(t, err)
	dnsSvc, err := cs.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, devcluster.ClusterDNSService, metav1.GetOptions{})
	must(t, err)
	cluster, err := operator.ClusterFromServices(coreSvc, proxySvc, operator.DefaultCorePort, operator.DefaultProxyPort)
	must(t, err)
	apiIP, apiPort := apiServerEndpoint(t, cs)
	ports := netpolicy.Ports{
		Plugin:     plugins.DefaultPluginPort,
		Core:       cluster.Topology.CorePodPort,
		CoreOwner:  ownerPodPort(t, coreSvc),
		Proxy:      cluster.Topology.ProxyPodPort,
		APIServer:  apiPort,
		NBPStandIn: 8443, // no stand-in runs here; its cells are not measured
	}

	port := func(ip string, p int) string { return net.JoinHostPort(ip, strconv.Itoa(p)) }
	probe := func(pod *corev1.Pod, args ...string) func() string {
		return func() string {
			out := execIn(t, e.c, cs, pod, append([]string{"/plugin"}, args...)...)
			if v := probeVerdict(out); v == "open" || v == "refused" {
				return v
			}
			return "timeout or error: " + strings.TrimSpace(out)
		}
	}
	dns := net.JoinHostPort(dnsSvc.Spec.ClusterIP, "53")
	const name = "kubernetes.default.svc.cluster.local"
	proxyAddr := proxySvc.Spec.ClusterIP + ":" + strconv.Itoa(int(proxySvc.Spec.Ports[0].Port))
	status := &coreView{e: e, plugin: "probe-a"}
	cells := []isolationCell{
		{"plugin → core owner port", "plugin → core owner port", probe(a, "connect", port(core.Status.PodIP, ports.CoreOwner))},
		{"plugin → core", "plugin → core", probe(a, "connect", port(core.Status.PodIP, ports.Core))},
		{"plugin → cluster DNS Service, UDP", "plugin → cluster DNS, UDP", probe(a, "udp", dns)},
		{"plugin → cluster DNS Service, TCP", "plugin → cluster DNS, TCP", probe(a, "connect", dns)},
		{"plugin → egress proxy Service", "plugin → egress proxy", probe(a, "connect", proxyAddr)},
		{"plugin → API server", "plugin → API server", probe(a, "connect", port(apiIP, ports.APIServer))},
		{"plugin → other plugin", "plugin → other plugin", probe(a, "connect", port(b.Status.PodIP, ports.Plugin))},
		{"other plugin → plugin", "other plugin → plugin", probe(b, "connect", port(a.Status.PodIP, ports.Plugin))},
		{"other plugin (no egress) → egress proxy Service", "other plugin (no egress) → egress proxy", probe(b, "connect", proxyAddr)},
		{"other plugin → core", "other plugin → core", probe(b, "connect", port(core.Status.PodIP, ports.Core))},
		{"core look-alike elsewhere → core owner port", "core look-alike in another namespace → core owner port", probe(lookalike, "connect", port(core.Status.PodIP, ports.CoreOwner))},
		{"core look-alike elsewhere → plugin", "core look-alike in another namespace → plugin", probe(lookalike, "connect", port(a.Status.PodIP, ports.Plugin))},
		{"core look-alike elsewhere → egress proxy Service", "core look-alike in another namespace → egress proxy", probe(lookalike, "connect", proxyAddr)},
		{"API server → core owner port (plugin status)", "API server → core owner port", status.ownerAPI},
		{"core → plugin serving port (the core's call)", "core → plugin serving port", status.coreCalled},
		{"control: look-alike elsewhere → cluster DNS Service, UDP query", "", probe(lookalike, "resolve", "udp", name, dns)},
		{"control: look-alike elsewhere → cluster DNS Service, TCP query", "", probe(lookalike, "resolve", "tcp", name, dns)},
		{"control: look-alike elsewhere → cluster DNS Service, TCP", "", probe(lookalike, "connect", dns)},
	}

	// The engine's verdicts on every NetworkPolicy the cluster holds, in a
	// world of these pods and addresses.
	list, err := cs.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	must(t, err)
	policies := make([]*networkingv1.NetworkPolicy, 0, len(list.Items))
	var names []string
	for i := range list.Items {
		policies = append(policies, &list.Items[i])
		names = append(names, list.Items[i].Namespace+"/"+list.Items[i].Name)
	}
	if !slices.Contains(names, plugins.Namespace+"/openfief-core") {
		t.Fatalf("the cluster holds no NetworkPolicy openfief/openfief-core (deploy/core): %v", names)
	}
	gw := netpolicy.AddressPeer(e.c.NodeGateway().String())
	world := netpolicy.World{
		Peers: map[netpolicy.Role]netpolicy.Peer{
			netpolicy.Plugin:        podPeer(t, cs, a),
			netpolicy.OtherPlugin:   podPeer(t, cs, b),
			netpolicy.Core:          podPeer(t, cs, core),
			netpolicy.EgressProxy:   podPeer(t, cs, proxyPod),
			netpolicy.NamespacePod:  podPeer(t, cs, operatorPod),
			netpolicy.CoreLookalike: podPeer(t, cs, lookalike),
			netpolicy.ClusterDNS:    podPeer(t, cs, dnsPod),
			netpolicy.NodeResolver:  gw,
			netpolicy.NBPStandIn:    gw,
			netpolicy.APIServer:     netpolicy.AddressPeer(apiIP),
			netpolicy.Internet:      netpolicy.AddressPeer("203.0.113.10"),
		},
		Ports: ports,
	}
	engine, err := netpolicy.Compute(world, policies)
	if err != nil {
		t.Fatalf("the reference engine on the cluster's NetworkPolicies: %v", err)
	}
	expected := netpolicy.Expected(ports)
	want := map[string]string{}
	for _, c := range cells {
		want[c.name] = "open"
		if c.engine == "" {
			continue
		}
		row, ok := engine.Lookup(c.engine)
		if !ok {
			t.Fatalf("the reference engine has no cell %q", c.engine)
		}
		want[c.name] = observedAs(row.Verdict)
	}

	// Measure until every cell gives what the engine says, at most 2 minutes
	// (a new policy reaches the node's firewall within seconds); a cell that
	// settled is not measured again. Then report every cell.
	got := map[string]string{}
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		settled := true
		for _, c := range cells {
			if got[c.name] != want[c.name] {
				got[c.name] = c.measure()
				settled = settled && got[c.name] == want[c.name]
			}
		}
		return settled, nil
	})

	var tab bytes.Buffer
	w := tabwriter.NewWriter(&tab, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CELL\tEXPECTED\tENGINE\tOBSERVED")
	for _, c := range cells {
		exp, eng := "open (control)", "-"
		if c.engine != "" {
			row, _ := expected.Lookup(c.engine)
			exp = observedAs(row.Verdict)
			eng = want[c.name]
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.name, exp, eng, got[c.name])
		if c.engine != "" && exp != want[c.name] {
			t.Errorf("%s: the reference engine says %s on the cluster's policies, the platform promises %s", c.name, want[c.name], exp)
		}
		if got[c.name] != want[c.name] {
			t.Errorf("%s: observed %s, want %s (the reference engine's verdict, or open for a control)", c.name, got[c.name], want[c.name])
		}
	}
	_ = w.Flush()
	t.Logf("isolation truth table in-cluster (engine: cyclonus on the cluster's %d NetworkPolicies: %s):\n%s", len(policies), strings.Join(names, ", "), tab.String())
	t.Logf("the core's side, from openfief plugin status probe-a: %s", status.evidence)

	openfief(t, e.kubeconfig, "plugin", "uninstall", "probe-a", "--yes", "--purge", "--wait", "60s")
	openfief(t, e.kubeconfig, "plugin", "uninstall", "probe-b", "--yes", "--purge", "--wait", "60s")
}

// observedAs is what a probe observes for an engine verdict.
func observedAs(v netpolicy.Verdict) string {
	if v == netpolicy.Allowed {
		return "open"
	}
	return "refused"
}

// probeVerdict reads the probe's answer: connect and udp print open,
// refused or timeout; resolve prints the addresses it got (open) or the
// resolver's error, whose cause is kept.
func probeVerdict(out string) string {
	out = strings.TrimSpace(out)
	switch {
	case out == "open" || out == "refused" || out == "timeout":
		return out
	case strings.HasPrefix(out, "error: "):
		switch {
		case strings.Contains(out, "connection refused"):
			return "refused"
		case strings.Contains(out, "i/o timeout"):
			return "timeout"
		}
		return out
	case out != "" && !strings.Contains(out, " ") && net.ParseIP(strings.Split(out, ",")[0]) != nil:
		return "open"
	}
	return out
}

// coreView reads the core's side of the table from `openfief plugin
// status`, which the CLI answers from the core's owner API through the API
// server's service proxy.
type coreView struct {
	e        *platformEnv
	plugin   string
	evidence string
}

func (s *coreView) read() string {
	code, out := s.e.cli(context.Background(), "plugin", "status", s.plugin)
	s.evidence = fmt.Sprintf("exit %d: %s", code, lastLines(out, "Core", "Called:", "Last sync:", "Last error:"))
	return out
}

// ownerAPI is open when the status holds the core's own report (the owner
// port answered through the API server), refused when the CLI could not
// reach it.
func (s *coreView) ownerAPI() string {
	out := s.read()
	if strings.Contains(out, "Core (openfief-core):") {
		return "open"
	}
	return "not reached: " + lastLines(out, "Core:")
}

// coreCalled is open when the core called the plugin and met the probe's
// answer (it speaks no Connect, so the call fails after the connection
// opened), and refused when its last error is a connection that did not
// open.
func (s *coreView) coreCalled() string {
	out := s.read()
	last := lastLines(out, "Last error:")
	switch {
	case last == "":
		return "no call yet: " + lastLines(out, "Called:", "Last sync:")
	case strings.Contains(last, "i/o timeout"), strings.Contains(last, "connection refused"), strings.Contains(last, "no such host"), strings.Contains(last, "lookup "):
		return "refused: " + last
	}
	return "open"
}

// startLookalike runs the probe image as a pod labelled as the core's
// Service selects, in another namespace that no NetworkPolicy selects, and
// returns it Running. The namespace goes when the phase ends.
func startLookalike(t *testing.T, cs kubernetes.Interface, ref plugins.ImageRef) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhereNamespace}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		if err := cs.CoreV1().Namespaces().Delete(context.Background(), elsewhereNamespace, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", elsewhereNamespace, err)
		}
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "core-lookalike", Namespace: elsewhereNamespace, Labels: map[string]string{"app.kubernetes.io/name": "openfief-core"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "probe", Image: ref.String(), Command: []string{"/plugin"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	_, err = cs.CoreV1().Pods(elsewhereNamespace).Create(ctx, pod, metav1.CreateOptions{})
	must(t, err)
	testutil.Eventually(t, 2*time.Minute, "the core look-alike's pod Running", func() (bool, string) {
		p, err := cs.CoreV1().Pods(elsewhereNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return pod
}

// platformPod is a Running pod of namespace ns matching selector.
func platformPod(t *testing.T, cs kubernetes.Interface, ns, selector string) *corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	must(t, err)
	for i, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no Running pod in %s with %s (%d pods)", ns, selector, len(pods.Items))
	return nil
}

// podPeer is the engine's Peer of pod, with its namespace's labels as the
// API server holds them.
func podPeer(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) netpolicy.Peer {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Get(context.Background(), pod.Namespace, metav1.GetOptions{})
	must(t, err)
	return netpolicy.PodPeer(pod, ns)
}

// apiServerEndpoint is the API server's address and port as the
// default/kubernetes EndpointSlice publishes them: what NetworkPolicies
// see after the Service's translation.
func apiServerEndpoint(t *testing.T, cs kubernetes.Interface) (string, int) {
	t.Helper()
	list, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	must(t, err)
	for _, s := range list.Items {
		if len(s.Endpoints) > 0 && len(s.Endpoints[0].Addresses) > 0 && len(s.Ports) > 0 && s.Ports[0].Port != nil {
			return s.Endpoints[0].Addresses[0], int(*s.Ports[0].Port)
		}
	}
	t.Fatal("the kubernetes Service has no EndpointSlice with an address and a port")
	return "", 0
}

// ownerPodPort is the pod port of the core Service's port named owner.
func ownerPodPort(t *testing.T, core *corev1.Service) int {
	t.Helper()
	for _, p := range core.Spec.Ports {
		if p.Name == "owner" && p.TargetPort.IntValue() > 0 {
			return p.TargetPort.IntValue()
		}
	}
	t.Fatalf("Service %s has no port named owner with a numeric targetPort", core.Name)
	return 0
}

// containerEnv is the value of the first container's variable name in pod.
func containerEnv(pod *corev1.Pod, name string) string {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

// execIn runs command in the first container of pod through the API server
// and the kubelet and returns its standard output, or what went wrong.
func execIn(t *testing.T, c *devcluster.Cluster, cs kubernetes.Interface, pod *corev1.Pod, command ...string) string {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, clientgoscheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return fmt.Sprintf("exec error: %v (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String()
}
