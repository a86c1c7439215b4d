//go:build cluster

package devcluster_test

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestRealNodeEnforcesNetworkPolicy checks on real packets that the node's
// policy engine (kube-router's firewall) enforces NetworkPolicies: pod a may
// reach only b:8080 (egress), b accepts only a (ingress); c reaches neither
// b nor, once a's egress is narrowed, does a reach a listener of the test on
// the node's bridge. Deleting the policies opens everything again.
func TestRealNodeEnforcesNetworkPolicy(t *testing.T) {
	t.Parallel() // a namespace of its own on the shared node (main_test.go)
	c, cs, image, ns := sharedNode(t)
	ips := runProbePods(t, cs, ns, image, "a", "b", "c")

	bridge := bridgeListener(t, c)

	open := map[string]string{"a->b": "open", "c->b": "open", "a->bridge": "open"}
	expectCells(t, c, cs, ns, ips, bridge, open)

	ctx := t.Context()
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	policies := []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "b-from-a", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a-to-b", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				}},
			},
		},
	}
	start := time.Now()
	for _, p := range policies {
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expectCells(t, c, cs, ns, ips, bridge, map[string]string{"a->b": "open", "c->b": "refused", "a->bridge": "refused"})
	t.Logf("policies enforced within %v", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	for _, p := range policies {
		if err := cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expectCells(t, c, cs, ns, ips, bridge, open)
	t.Logf("open again within %v", time.Since(start).Round(time.Millisecond))
}

// expectCells waits (at most 20 s) until every cell (from->to, from a pod
// of namespace ns, to being a pod name or "bridge") gives the wanted result,
// then prints the table; it fails naming the cells that never did.
func expectCells(t *testing.T, c *devcluster.Cluster, cs kubernetes.Interface, ns string, ips map[string]string, bridge string, want map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := map[string]string{}
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		all := true
		for cell, w := range want {
			from, to, _ := strings.Cut(cell, "->")
			addr := bridge
			if to != "bridge" {
				addr = net.JoinHostPort(ips[to], "8080")
			}
			got[cell] = strings.TrimSpace(execIn(ctx, t, c, cs, ns, from, "/probe", "connect", addr))
			if got[cell] != w {
				all = false
			}
		}
		return all, nil
	})
	for _, cell := range slices.Sorted(maps.Keys(want)) {
		w := want[cell]
		t.Logf("%-10s %-8s (want %s)", cell, got[cell], w)
		if err != nil && got[cell] != w {
			t.Errorf("%s: %s; want %s", cell, got[cell], w)
		}
	}
}
