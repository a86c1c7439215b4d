//go:build cluster

package devcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestRestartAPIServer restarts a full control plane's API server, once
// gracefully and once killed together with etcd, and checks after each
// restart that the data survived, that the admin identity and a token issued
// before still authenticate, and that the controller manager, scheduler and
// kwok carried on (a Deployment created after the restart becomes
// Available). It runs a control plane of its own, so no other test of the
// package sees the restarts.
func TestRestartAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{Mode: devcluster.Full})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, ctx, c, "restart", nil)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"restart-test"}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for i, opts := range []devcluster.RestartOptions{
		{Grace: 5 * time.Second, Down: 300 * time.Millisecond},
		{Etcd: true, Kill: true, Down: 300 * time.Millisecond},
	} {
		began := time.Now()
		if err := c.RestartAPIServer(ctx, opts); err != nil {
			t.Fatalf("restart %+v: %v", opts, err)
		}
		t.Logf("restart %+v took %s", opts, time.Since(began).Round(10*time.Millisecond))

		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || cm.Data["k"] != "v" {
			t.Fatalf("after restart %+v: ConfigMap %v, %v", opts, cm, err)
		}
		review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token, Audiences: []string{"restart-test"}},
		}, metav1.CreateOptions{})
		if err != nil || !review.Status.Authenticated {
			t.Fatalf("after restart %+v: token issued before is not accepted: %v %+v", opts, err, review)
		}
		deploymentBecomesAvailable(t, ctx, cs, ns, fmt.Sprintf("after-%d", i))
	}
}

// deploymentBecomesAvailable creates a one-replica Deployment and waits for
// it to become Available, which takes the controller manager, the scheduler
// and kwok.
func deploymentBecomesAvailable(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(waitCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Deployment %s not Available within 60 s: %v", name, err)
	}
}
