//go:build cluster

package devcluster_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestRealNodeStopNetworkPolicy (a node of its own: it stops a component of
// the node, and checks the node's cleanup after that) checks on real
// packets that
// StopNetworkPolicy leaves a node whose NetworkPolicies nobody enforces,
// the cluster `openfief check --isolation` must notice, and that
// StartNetworkPolicy enforces them again. A policy denies every ingress to
// pod b: a reaches neither b nor b's Service while kube-router runs, both
// right after StopNetworkPolicy (no rule or ipset of kube-router is left,
// kube-proxy's table is), neither right after StartNetworkPolicy. b reaches
// a throughout. The test ends with the controller stopped, so the node's
// cleanup is checked without it.
func TestRealNodeStopNetworkPolicy(t *testing.T) {
	c, cs, image := startProbeNode(t)
	const ns = "probe"
	ips := runProbePods(t, cs, ns, image, "a", "b")
	ips["svc-b"] = probeService(t, cs, ns, "b")

	open := map[string]string{"a->b": "open", "a->svc-b": "open", "b->a": "open"}
	denied := map[string]string{"a->b": "refused", "a->svc-b": "refused", "b->a": "open"}
	expectCells(t, c, cs, ns, ips, "", open)

	ctx := t.Context()
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "b-no-ingress", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectCells(t, c, cs, ns, ips, "", denied)

	stopCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := c.StopNetworkPolicy(stopCtx); err != nil {
		t.Fatalf("StopNetworkPolicy: %v", err)
	}
	t.Logf("StopNetworkPolicy took %v", time.Since(start).Round(time.Millisecond))
	if left := routerTraces(t); len(left) > 0 {
		t.Errorf("kube-router's rules left after StopNetworkPolicy:\n%s", strings.Join(left, "\n"))
	}
	expectCellsNow(t, c, cs, ns, ips, "after StopNetworkPolicy", open)
	expectCells(t, c, cs, ns, ips, "", open)

	start = time.Now()
	if err := c.StartNetworkPolicy(stopCtx); err != nil {
		t.Fatalf("StartNetworkPolicy: %v", err)
	}
	t.Logf("StartNetworkPolicy took %v", time.Since(start).Round(time.Millisecond))
	expectCellsNow(t, c, cs, ns, ips, "after StartNetworkPolicy", denied)
	expectCells(t, c, cs, ns, ips, "", denied)

	if err := c.StopNetworkPolicy(stopCtx); err != nil {
		t.Fatalf("StopNetworkPolicy again: %v", err)
	}
	expectCellsNow(t, c, cs, ns, ips, "after the second StopNetworkPolicy", open)
}

// probeService makes a ClusterIP Service named app in namespace ns for
// the probe pod labelled app=app, port 8080, and returns its ClusterIP.
func probeService(t *testing.T, cs kubernetes.Interface, ns, app string) string {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// expectCellsNow checks every cell (from->to, to in ips) once, without
// waiting: what a method promised on return must already hold.
func expectCellsNow(t *testing.T, c *devcluster.Cluster, cs kubernetes.Interface, ns string, ips map[string]string, when string, want map[string]string) {
	t.Helper()
	for cell, w := range want {
		from, to, _ := strings.Cut(cell, "->")
		got := strings.TrimSpace(execIn(t.Context(), t, c, cs, ns, from, "/probe", "connect", net.JoinHostPort(ips[to], "8080")))
		if got != w {
			t.Errorf("%s: %s is %s; want %s", when, cell, got, w)
		}
	}
}

// routerTraces lists what NodeLeftovers sees of kube-router's firewall (its
// chains and the jumps to them, its ipsets), and fails the test if
// kube-proxy's table is gone with them.
func routerTraces(t *testing.T) []string {
	t.Helper()
	left, err := devcluster.NodeLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	var router []string
	proxy := false
	for _, l := range left {
		switch {
		case strings.HasPrefix(l, "iptables rule: "), strings.HasPrefix(l, "ip6tables rule: "), strings.HasPrefix(l, "ipset "):
			router = append(router, l)
		case l == "nft table ip kube-proxy":
			proxy = true
		}
	}
	if !proxy {
		t.Errorf("kube-proxy's nft table is gone; NodeLeftovers lists:\n%s", strings.Join(left, "\n"))
	}
	return router
}
