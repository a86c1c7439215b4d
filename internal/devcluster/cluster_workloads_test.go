//go:build cluster

package devcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// full returns the package's full control plane.
func full(t *testing.T) *devcluster.Cluster {
	return devcluster.Shared(t, devcluster.Options{Mode: devcluster.Full, Nodes: 2})
}

// TestDeploymentAvailableAndCollected checks that a Deployment's pods are
// scheduled onto fake nodes and become Ready, so the Deployment becomes
// Available, and that the garbage collector deletes the Deployment, its
// ReplicaSet and its pods when their owner goes.
func TestDeploymentAvailableAndCollected(t *testing.T) {
	c := full(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := createNamespace(t, ctx, c, "deploy", nil)

	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "ConfigMap",
				Name:               owner.Name,
				UID:                owner.UID,
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	availableCtx, cancelAvailable := context.WithTimeout(ctx, 60*time.Second)
	defer cancelAvailable()
	err = wait.PollUntilContextCancel(availableCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return d.Status.ReadyReplicas == 2, nil
			}
		}
		return false, nil
	})
	if err != nil {
		d, _ := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		t.Fatalf("Deployment not Available within 60 s: %v; status: %+v", err, d.Status)
	}
	t.Logf("Deployment Available after %s", time.Since(began).Round(10*time.Millisecond))

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			t.Errorf("pod %s: node %q, phase %s, IP %q; want scheduled and Running with an IP",
				p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
		}
	}

	// Foreground deletion of the owner: the garbage collector deletes the
	// Deployment (and, through it, its ReplicaSet and pods) first, because
	// its owner reference blocks the owner's deletion.
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
	}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, ignoreNotFound(err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, owner.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, ignoreNotFound(err)
		}
		rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(rs.Items) > 0 {
			return false, err
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("owner's dependents not garbage-collected: %v", err)
	}
}

// ignoreNotFound returns nil for a NotFound error and err otherwise.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TestPodSecurityRestricted checks that a namespace labelled to enforce the
// restricted Pod Security Standard refuses a pod violating it and admits
// one meeting it.
func TestPodSecurityRestricted(t *testing.T) {
	c := full(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ns := createNamespace(t, ctx, c, "restricted", map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	})

	violating := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           "example.invalid/app:1",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
		},
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, violating, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Errorf("creating a privileged pod in a restricted namespace: err = %v, want Forbidden by PodSecurity", err)
	}

	compliant := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nonroot"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "example.invalid/app:1",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, compliant, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a restricted-compliant pod: %v", err)
	}
}
