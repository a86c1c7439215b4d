package deploy

import (
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestKustomizationsRender builds each install kustomization with the
// kustomize API, as `kubectl apply -k` would, and checks what it renders.
func TestKustomizationsRender(t *testing.T) {
	tests := map[string][]string{
		"crds": {
			"CustomResourceDefinition/plugingrants.openfief.io",
			"CustomResourceDefinition/plugins.openfief.io",
			"LimitRange/openfief-limits",
			"Namespace/openfief",
			"ResourceQuota/openfief-quota",
		},
		"operator": {
			"Deployment/openfief-operator",
			"NetworkPolicy/openfief-default-deny",
			"NetworkPolicy/openfief-operator",
			"Role/openfief-operator",
			"RoleBinding/openfief-operator",
			"ServiceAccount/openfief-operator",
		},
		"admission": {
			"ClusterRole/openfief-platform-installer",
			"ValidatingAdmissionPolicy/openfief-service-account-tokens",
			"ValidatingAdmissionPolicy/openfief-workload-identities",
			"ValidatingAdmissionPolicyBinding/openfief-service-account-tokens",
			"ValidatingAdmissionPolicyBinding/openfief-workload-identities",
		},
		"monitoring": {
			"NetworkPolicy/openfief-core-metrics",
			"NetworkPolicy/openfief-operator-metrics",
			"PrometheusRule/openfief",
			"Service/openfief-core-metrics",
			"Service/openfief-operator-metrics",
			"ServiceMonitor/openfief",
		},
		"egress-proxy": {
			"Deployment/openfief-egress-proxy",
			"NetworkPolicy/openfief-egress-proxy",
			"Service/openfief-egress-proxy",
			"ServiceAccount/openfief-egress-proxy",
		},
	}
	for dir, want := range tests {
		t.Run(dir, func(t *testing.T) {
			k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
			res, err := k.Run(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				t.Fatalf("kustomize build %s: %v", dir, err)
			}
			var got []string
			for _, r := range res.Resources() {
				got = append(got, r.GetKind()+"/"+r.GetName())
				if r.GetKind() != "Namespace" && !isClusterScoped(r.GetKind()) && r.GetNamespace() != "openfief" {
					t.Errorf("%s/%s is in namespace %q, want openfief (D-15)", r.GetKind(), r.GetName(), r.GetNamespace())
				}
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					t.Errorf("%s renders %v, missing %s", dir, got, w)
				}
			}
		})
	}
}

func isClusterScoped(kind string) bool {
	switch kind {
	case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return true
	}
	return false
}
