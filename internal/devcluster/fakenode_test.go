//go:build cluster

package devcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestFakeNodeLeasesRenewed checks that kwok holds a node lease for every
// fake node and renews it, as a kubelet does, so the node lifecycle
// controller sees a heartbeat at least every renewal.
func TestFakeNodeLeasesRenewed(t *testing.T) {
	c := full(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	first := map[string]time.Time{}
	renewed := map[string]bool{}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		for _, node := range []string{"kwok-node-0", "kwok-node-1"} {
			l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				return false, ignoreNotFound(err)
			}
			if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 40 {
				return false, fmt.Errorf("lease %s lasts %v seconds, want 40", node, l.Spec.LeaseDurationSeconds)
			}
			if t0, seen := first[node]; !seen {
				first[node] = l.Spec.RenewTime.Time
			} else if l.Spec.RenewTime.After(t0) {
				renewed[node] = true
			}
		}
		return len(renewed) == 2, nil
	})
	if err != nil {
		t.Fatalf("the fake nodes' leases were not renewed (first renewals seen %v, renewed since %v): %v", first, renewed, err)
	}
}

// TestFakeNodePodReadyAgain marks a running pod not Ready the way the node
// lifecycle controller does when its node misses its heartbeats (it flips
// the pod's Ready condition and nothing else), and checks that the pod
// becomes Ready again, as it would once a real kubelet is back, and its
// Deployment Available. Letting a fake node really miss its heartbeats
// would take the controller's 50 s grace period and more; the write is the
// controller's own.
func TestFakeNodePodReadyAgain(t *testing.T) {
	c := full(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := createNamespace(t, ctx, c, "ready-again", nil)
	deploymentBecomesAvailable(t, ctx, cs, ns, "again")
	pod := waitOnePodReady(t, ctx, cs, ns, "app=again", "")

	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
			pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	marked := time.Now()
	again := waitOnePodReady(t, ctx, cs, ns, "app=again", pod.Name)
	if again.Name != pod.Name || again.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod %s (%s) after marking %s not Ready; want the same pod Running", again.Name, again.Status.Phase, pod.Name)
	}
	t.Logf("pod Ready again %s after it was marked not Ready", time.Since(marked).Round(10*time.Millisecond))
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "again", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, err
	})
	if err != nil {
		t.Fatalf("Deployment not Available again: %v", err)
	}
}

// waitOnePodReady waits until the one pod the selector matches is Ready,
// and, when name is set, is that pod.
func waitOnePodReady(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, selector, name string) *corev1.Pod {
	t.Helper()
	var last string
	var ready *corev1.Pod
	waitCtx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(waitCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) != 1 {
			last = fmt.Sprintf("%d pods", len(pods.Items))
			return false, err
		}
		p := &pods.Items[0]
		last = fmt.Sprintf("pod %s phase %s conditions %v", p.Name, p.Status.Phase, p.Status.Conditions)
		if name != "" && p.Name != name {
			return false, fmt.Errorf("pod %s replaced by %s", name, p.Name)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for a Ready pod %s: %v; last seen: %s", selector, err, last)
	}
	return ready
}
