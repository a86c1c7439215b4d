//go:build cluster

package devcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	c, cs := ownFullCluster(t, ctx, 0)
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

// ownFullCluster starts a full control plane of the test's own, with nodes
// kwok nodes (0: the default), stopped when the test ends.
func ownFullCluster(t *testing.T, ctx context.Context, nodes int) (*devcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	c, err := devcluster.Start(ctx, devcluster.Options{Mode: devcluster.Full, Nodes: nodes})
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
	return c, cs
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

// TestKwokStartedAgain kills kwok, as the data race in its CEL library
// (easycel v0.6.0's unguarded type cache) did while its controllers
// started, and checks that the cluster starts it again at once: a
// Deployment created afterwards becomes Available, the fake node's lease was
// handed to the new kwok rather than waited out, and kwok's log tells of the
// restart. It runs a control plane of its own.
func TestKwokStartedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, cs := ownFullCluster(t, ctx, 1)
	ns := createNamespace(t, ctx, c, "kwok-again", nil)
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kwok-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := kwokPid(t, c)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	deploymentBecomesAvailable(t, ctx, cs, ns, "after-kwok-crash")
	t.Logf("Deployment Available %s after kwok was killed", time.Since(killed).Round(10*time.Millisecond))
	if again := kwokPid(t, c); again == first {
		t.Fatalf("kwok still has pid %d after SIGKILL", first)
	}
	// The dead kwok's lease was released, not waited out: the new kwok
	// holds a new one.
	again, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kwok-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.UID == lease.UID || again.Spec.HolderIdentity == nil || *again.Spec.HolderIdentity == *lease.Spec.HolderIdentity {
		t.Errorf("the node lease is still the dead kwok's (holder %q, uid %s)", ptr.Deref(again.Spec.HolderIdentity, ""), again.UID)
	}
	log, err := os.ReadFile(filepath.Join(c.Dir, "logs", "kwok.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "kwok exited (signal: killed); starting it again"; !strings.Contains(string(log), want) {
		t.Errorf("kwok's log does not say %q", want)
	}
}

// kwokPid returns the pid of the kwok this process runs for cluster c.
func kwokPid(t *testing.T, c *devcluster.Cluster) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0, rest, _ := bytes.Cut(cmdline, []byte{0})
		if filepath.Base(string(argv0)) == "kwok" && bytes.Contains(rest, []byte(c.Dir)) {
			return pid
		}
	}
	t.Fatalf("no kwok process for the cluster in %s", c.Dir)
	return 0
}
