//go:build cluster

package devcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestRealNodeClusterDNS, on the shared real node with the cluster DNS
// (CoreDNS built from hack/tools/coredns, from the node's registry), from a pod
// resolves the kubernetes Service and a Service of the test to their
// ClusterIPs over UDP and TCP, by full name and through the search path the
// kubelet writes; a name outside the cluster is forwarded to the node's
// resolver, which answers a stand-in (StandIn) from its table, and a
// missing name in the cluster's zone does not resolve. CoreDNS's pod is one the restricted Pod Security
// Standard admits.
func TestRealNodeClusterDNS(t *testing.T) {
	t.Parallel() // a namespace of its own on the shared node (main_test.go)
	start := time.Now()
	c, cs, image, ns := sharedNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	dnsSvc, err := cs.CoreV1().Services("kube-system").Get(ctx, devcluster.ClusterDNSService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dnsSvc.Spec.ClusterIP, c.ClusterDNS().String(); got != want {
		t.Errorf("kube-dns ClusterIP %s; want the kubelet's clusterDNS %s", got, want)
	}

	web := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if web, err = cs.CoreV1().Services(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bank, err := c.StandIn("bank.example.net")
	if err != nil {
		t.Fatal(err)
	}
	if !devcluster.StandInPrefix.Contains(bank) {
		t.Errorf("stand-in address %s is outside %s", bank, devcluster.StandInPrefix)
	}
	createPodWhenAdmitted(ctx, t, cs, restrictedPod(ns, "dns", image))
	runningPod(ctx, t, cs, ns, "dns")

	cases := []struct{ name, want string }{
		{"kubernetes.default.svc.cluster.local", kube.Spec.ClusterIP},
		{"kubernetes.default", kube.Spec.ClusterIP}, // through the search path
		{"web." + ns + ".svc.cluster.local", web.Spec.ClusterIP},
		{"web", web.Spec.ClusterIP},
		{"bank.example.net", bank.String()}, // forwarded to the node's resolver
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			// The Service's name may reach CoreDNS's cache a moment after
			// the Service: poll a little.
			var got string
			_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				got = strings.TrimSpace(execIn(ctx, t, c, cs, ns, "dns", "/probe", "resolve", network, tc.name))
				return got == tc.want, nil
			})
			t.Logf("%s %-40s %s", network, tc.name, got)
			if got != tc.want {
				t.Errorf("resolving %s over %s: %q; want %q", tc.name, network, got, tc.want)
			}
		}
		name := "nosuch." + ns + ".svc.cluster.local"
		got := strings.TrimSpace(execIn(ctx, t, c, cs, ns, "dns", "/probe", "resolve", network, name))
		t.Logf("%s %-40s %s", network, name, got)
		if !strings.HasPrefix(got, "error: ") {
			t.Errorf("resolving %s over %s: %q; want an error (no such Service)", name, network, got)
		}
	}

	// CoreDNS's pod as the restricted Pod Security Standard sees it: its
	// Deployment's template, dry-run in the test's namespace, which enforces
	// it (the ServiceAccount and priority are kube-system's, so left out).
	dep, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := dep.Spec.Template.Spec.DeepCopy()
	spec.PriorityClassName, spec.Priority = "", nil
	spec.ServiceAccountName = "default"
	// The template carries the deprecated alias too; both must agree.
	spec.DeprecatedServiceAccount = "default"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-restricted", Namespace: ns}, Spec: *spec}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("CoreDNS's pod under the restricted Pod Security Standard: %v", err)
	}
	t.Logf("whole test body in %v", time.Since(start).Round(time.Millisecond))
}
