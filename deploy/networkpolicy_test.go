package deploy_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/arkadiuss/openfief/deploy"
)

// TestDefaultDenySelectsEveryPod: the floor under openfief (OF-19) selects
// every pod whatever its labels, a pod with none included, and allows
// nothing; and each of the platform's own Deployments has a policy of its own
// selecting its pods, so the floor leaves them their allowances.
func TestDefaultDenySelectsEveryPod(t *testing.T) {
	var (
		policies    []networkingv1.NetworkPolicy
		deployments []appsv1.Deployment
	)
	for _, dir := range []string{"operator", "egress-proxy", "core"} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			switch u.GetKind() {
			case "NetworkPolicy":
				var np networkingv1.NetworkPolicy
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
					t.Fatal(err)
				}
				policies = append(policies, np)
			case "Deployment":
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
					t.Fatal(err)
				}
				deployments = append(deployments, d)
			}
		}
	}
	selects := func(np *networkingv1.NetworkPolicy, podLabels map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatalf("%s: %v", np.Name, err)
		}
		return sel.Matches(labels.Set(podLabels))
	}

	var deny *networkingv1.NetworkPolicy
	for i := range policies {
		if policies[i].Name == "openfief-default-deny" {
			deny = &policies[i]
		}
	}
	if deny == nil {
		t.Fatal("deploy/operator renders no openfief-default-deny")
	}
	if deny.Namespace != "openfief" || len(deny.Spec.PodSelector.MatchLabels) != 0 || len(deny.Spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("openfief-default-deny selects %+v in %q, want every pod in openfief", deny.Spec.PodSelector, deny.Namespace)
	}
	if len(deny.Spec.PolicyTypes) != 2 || len(deny.Spec.Ingress) != 0 || len(deny.Spec.Egress) != 0 {
		t.Errorf("openfief-default-deny: policyTypes %v, %d ingress and %d egress rules; want both types and no rule",
			deny.Spec.PolicyTypes, len(deny.Spec.Ingress), len(deny.Spec.Egress))
	}
	// A plugin pod stripped of its labels (which would otherwise step out of every policy),
	// and one with only a name label.
	for _, l := range []map[string]string{nil, {"app.kubernetes.io/name": "anything"}} {
		if !selects(deny, l) {
			t.Errorf("openfief-default-deny does not select a pod labelled %v", l)
		}
	}

	for _, d := range deployments {
		n := 0
		for i := range policies {
			if policies[i].Name != deny.Name && selects(&policies[i], d.Spec.Template.Labels) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("no NetworkPolicy but the default deny selects the pods of Deployment %s: it could reach nothing", d.Name)
		}
	}
	if len(deployments) != 3 {
		t.Errorf("%d Deployments rendered, want the operator's, the proxy's and the core's", len(deployments))
	}
}
