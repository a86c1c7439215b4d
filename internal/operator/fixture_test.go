//go:build cluster

package operator

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// waitTimeout bounds every wait for the operator to act.
const waitTimeout = 20 * time.Second

// fixture is one reconciler test's world: the package's control plane, a
// client of it, the fake image checker and a running operator that uses it.
type fixture struct {
	t        *testing.T
	cluster  *devcluster.Cluster
	cl       client.Client
	images   *fakeImages
	operator *operatorRun
}

// newFixture starts an operator against the test cluster with a fake image
// checker that has signed nothing yet.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	c, cl := testCluster(t)
	images := newFakeImages()
	return &fixture{t: t, cluster: c, cl: cl, images: images, operator: startOperator(t, c, images)}
}

// create creates every object, failing the test on an error.
func (f *fixture) create(objs ...client.Object) {
	f.t.Helper()
	for _, obj := range objs {
		if err := f.cl.Create(context.Background(), obj); err != nil {
			f.t.Fatalf("create %s: %v", obj.GetName(), err)
		}
	}
}

// delete deletes obj, failing the test on an error.
func (f *fixture) delete(obj client.Object) {
	f.t.Helper()
	if err := f.cl.Delete(context.Background(), obj); err != nil {
		f.t.Fatalf("delete %s: %v", obj.GetName(), err)
	}
}

// run signs p's image, creates p with a grant of exactly what it asks for
// and waits until its workload is applied: Ready=Progressing, since minimal
// mode has no Deployment controller. It returns the Plugin as last read.
func (f *fixture) run(p *v1alpha1.Plugin) *v1alpha1.Plugin {
	f.t.Helper()
	f.images.sign(p.Spec.Image)
	f.create(p, testutil.GrantFor(p).Obj())
	return f.waitReady(p.Name, v1alpha1.ReasonProgressing)
}

// waitPlugin re-reads the Plugin until done holds for it and returns it.
// done reports the state it saw for the failure message.
func (f *fixture) waitPlugin(name, what string, done func(*v1alpha1.Plugin) (bool, string)) *v1alpha1.Plugin {
	f.t.Helper()
	var p v1alpha1.Plugin
	testutil.Eventually(f.t, waitTimeout, name+" "+what, func() (bool, string) {
		if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
			return false, err.Error()
		}
		return done(&p)
	})
	return &p
}

// waitReady waits until the Plugin's status describes its generation with
// the Ready reason.
func (f *fixture) waitReady(name, reason string) *v1alpha1.Plugin {
	f.t.Helper()
	return f.waitPlugin(name, "Ready="+reason, func(p *v1alpha1.Plugin) (bool, string) {
		c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && p.Status.ObservedGeneration == p.Generation, c.Reason + ": " + c.Message
	})
}

// exists reads the object of the plugin's workload into obj and reports
// whether it exists.
func (f *fixture) exists(name string, obj client.Object) bool {
	f.t.Helper()
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(name)}
	err := f.cl.Get(context.Background(), key, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// runningImage is the image the plugin's Deployment runs, "" without one.
func (f *fixture) runningImage(name string) string {
	f.t.Helper()
	var dep appsv1.Deployment
	if !f.exists(name, &dep) || len(dep.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return dep.Spec.Template.Spec.Containers[0].Image
}

// allowList returns the plugin's allow-list value and whether it has a key.
func (f *fixture) allowList(name string) (string, bool) {
	f.t.Helper()
	var cm corev1.ConfigMap
	if err := f.cl.Get(context.Background(), allowListKey, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false
		}
		f.t.Fatal(err)
	}
	v, ok := cm.Data[name]
	return v, ok
}

// waitTornDown waits until only a deny-all NetworkPolicy is left of the plugin.
func (f *fixture) waitTornDown(name string) {
	f.t.Helper()
	testutil.Eventually(f.t, waitTimeout, name+" torn down", func() (bool, string) {
		if f.exists(name, &appsv1.Deployment{}) || f.exists(name, &corev1.Service{}) ||
			f.exists(name, &corev1.ServiceAccount{}) || f.exists(name, &corev1.ConfigMap{}) {
			return false, "workload objects remain"
		}
		var np networkingv1.NetworkPolicy
		if !f.exists(name, &np) {
			return false, "no NetworkPolicy"
		}
		if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
			return false, "NetworkPolicy is not deny-all"
		}
		if _, ok := f.allowList(name); ok {
			return false, "allow-list key remains"
		}
		return true, ""
	})
}

// update re-reads obj and applies mutate, retrying on conflicts.
func update[T client.Object](t testing.TB, cl client.Client, obj T, mutate func(T)) {
	t.Helper()
	for range 10 {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		mutate(obj)
		err := cl.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("update kept conflicting")
}

// label sets a label on obj, which triggers reconciles but changes nothing
// the operator computes.
func label[T client.Object](t testing.TB, cl client.Client, obj T, key, value string) {
	t.Helper()
	update(t, cl, obj, func(o T) {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = value
		o.SetLabels(labels)
	})
}
