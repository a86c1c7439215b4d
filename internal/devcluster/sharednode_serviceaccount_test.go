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
	"k8s.io/client-go/kubernetes"
)

// TestRealNodeServiceAccountToken runs a pod on the real node as a real
// cluster runs it: the ServiceAccount admission plugin gives it the
// kube-api-access volume, and from inside the container the probe calls the
// API server as an in-cluster client does (KUBERNETES_SERVICE_HOST, the
// mounted CA and token): the API server names the pod's ServiceAccount. The
// controller manager's controllers have ServiceAccounts of their own
// (--use-service-account-credentials).
func TestRealNodeServiceAccountToken(t *testing.T) {
	t.Parallel() // a namespace of its own on the shared node (main_test.go)
	start := time.Now()
	c, cs, image, ns := sharedNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	pod := restrictedPod(ns, "sa", image)
	pod.Spec.AutomountServiceAccountToken = nil // the default ServiceAccount's default: mounted
	createPodWhenAdmitted(ctx, t, cs, pod)
	runningPod(ctx, t, cs, ns, "sa")
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "sa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProjectedToken(got) {
		t.Fatalf("pod has no kube-api-access projected ServiceAccount token; volumes %+v", got.Spec.Volumes)
	}
	out := strings.TrimSpace(execIn(ctx, t, c, cs, ns, "sa", "/probe", "apiserver"))
	if want := "user system:serviceaccount:" + ns + ":default"; out != want {
		t.Errorf("probe apiserver printed %q; want %q (the API server through the kubernetes Service, with the mounted token)", out, want)
	}

	// With --use-service-account-credentials the controller manager makes a
	// ServiceAccount per controller and acts as it.
	for _, sa := range []string{"replicaset-controller", "deployment-controller"} {
		if _, err := cs.CoreV1().ServiceAccounts("kube-system").Get(ctx, sa, metav1.GetOptions{}); err != nil {
			t.Errorf("kube-system/%s: %v (controllers not under their own identities?)", sa, err)
		}
	}
	t.Logf("node, pod and checks in %v", time.Since(start).Round(time.Millisecond))
}

// createPodWhenAdmitted creates pod, retrying while the ServiceAccount
// admission plugin refuses it because the controller manager has yet to
// make the namespace's default ServiceAccount (as on any fresh cluster).
func createPodWhenAdmitted(ctx context.Context, t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	var lastErr error
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, lastErr = cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return lastErr == nil, nil
	}); err != nil {
		t.Fatalf("creating pod %s/%s: %v (last: %v)", pod.Namespace, pod.Name, err, lastErr)
	}
}

// runningPod waits until the pod runs and returns it.
func runningPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		if pod != nil {
			t.Fatalf("pod %s/%s not Running: %v; status %+v", ns, name, err, pod.Status)
		}
		t.Fatalf("pod %s/%s not Running: %v", ns, name, err)
	}
	return pod
}

// hasProjectedToken reports whether pod mounts a projected ServiceAccount
// token volume, as the ServiceAccount admission plugin adds.
func hasProjectedToken(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil || !strings.HasPrefix(v.Name, "kube-api-access-") {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}
