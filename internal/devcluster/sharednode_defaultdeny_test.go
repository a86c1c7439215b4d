//go:build cluster

package devcluster_test

import (
	"os"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestRealNodeDefaultDenyHoldsStrippedPod checks on real packets the floor
// of OF-19: deploy/operator's openfief-default-deny,
// which selects every pod of its namespace, keeps a pod that lost all its
// labels from reaching anything, though no other policy selects it any more.
// Pod a may reach b:8080 by its label; once its labels are removed it
// reaches neither b nor a listener of the test on the node's bridge. With
// the floor deleted, the same unlabelled pod reaches the listener: the floor,
// not chance, refused it. The test's namespace stands in for openfief, where
// the admission policy would refuse the relabelling itself.
func TestRealNodeDefaultDenyHoldsStrippedPod(t *testing.T) {
	t.Parallel() // a namespace of its own on the shared node (main_test.go)
	c, cs, image, ns := sharedNode(t)
	raw, err := os.ReadFile("../../deploy/operator/plugins_default_deny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var floor networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(raw, &floor); err != nil {
		t.Fatal(err)
	}
	floor.Namespace = ns

	ips := runProbePods(t, cs, ns, image, "a", "b")

	bridge := bridgeListener(t, c)

	ctx := t.Context()
	port := intstr.FromInt32(8080)
	selector := func(app string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	toB := selector("b")
	// a → b:8080, allowed at both ends by the pods' labels, over the floor.
	allow := []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a-to-b", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: selector("a"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &toB}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
				}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "b-from-anyone", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: selector("b"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}},
			},
		},
	}
	for _, p := range append(allow, &floor) {
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expectCells(t, c, cs, ns, ips, bridge, map[string]string{"a->b": "open", "a->bridge": "refused"})

	// The walk-around: every label of a removed.
	patch := []byte(`{"metadata":{"labels":null}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectCells(t, c, cs, ns, ips, bridge, map[string]string{"a->b": "refused", "a->bridge": "refused"})

	// Without the floor the unlabelled pod is selected by nothing: open.
	if err := cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, floor.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectCells(t, c, cs, ns, ips, bridge, map[string]string{"a->b": "open", "a->bridge": "open"})
}
