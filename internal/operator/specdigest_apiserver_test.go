//go:build cluster

package operator

import (
	"context"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestCompactedDeploymentHoldsAsTheWholeOne runs a plugin with a Secret, a
// config and egress on the API server, then asks holds the same questions of
// its Deployment as the API server returns it and of the cache's compacted
// copy (OF-16): desired as the operator applied it, desired changed in each
// field the operator sets, and the cluster's object changed by another
// manager's update. Both must answer the same, but for an item another
// manager added to a list: the whole copy says "not held" and so was
// applied on every reconcile without removing the item (server-side apply
// leaves other managers' items); the compacted copy says held.
func TestCompactedDeploymentHoldsAsTheWholeOne(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("compact", testutil.Image("compact-1")).Egress("api.nbp.pl").
		Secret("creds", "/etc/creds").ConfigSchema(`{"type":"object","properties":{"a":{"type":"string"}}}`).Config(`{"a":"b"}`).Obj()
	f.images.sign(p.Spec.Image)
	f.create(p, testutil.GrantFor(p).PullSecrets("pull-a").Obj())
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	f.operator.stop() // the test's own edits must stay as made

	live := func() *appsv1.Deployment {
		var d appsv1.Deployment
		f.exists(p.Name, &d)
		return &d
	}
	compacted := func(d *appsv1.Deployment) *appsv1.Deployment { return cachedCopy(t, d) }
	// desired is what the operator applied: the part of the object its
	// field manager owns.
	d0 := live()
	ac, err := appsv1ac.ExtractDeployment(d0, FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	var desired appsv1.Deployment
	if err := json.Unmarshal(raw, &desired); err != nil {
		t.Fatal(err)
	}
	c0 := compacted(d0)
	if !holds(d0, &desired) || !holds(c0, &desired) {
		t.Fatalf("desired not held: whole %v, compacted %v", holds(d0, &desired), holds(c0, &desired))
	}

	changes := map[string]func(*appsv1.Deployment){
		"image": func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = testutil.Image("compact-2") },
		"read-only root": func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
		},
		"secret mounted": func(d *appsv1.Deployment) {
			for i := range d.Spec.Template.Spec.Volumes {
				if s := d.Spec.Template.Spec.Volumes[i].Secret; s != nil {
					s.SecretName = "someone-elses"
				}
			}
		},
		"env":         func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Env[0].Name = "OTHER" },
		"pull secret": func(d *appsv1.Deployment) { d.Spec.Template.Spec.ImagePullSecrets = nil },
		"service account token": func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
		},
		"config hash": func(d *appsv1.Deployment) { d.Spec.Template.Annotations["openfief.io/config-hash"] = "x" },
		"replicas":    func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) },
	}
	for name, change := range changes {
		want := desired.DeepCopy()
		change(want)
		if w, c := holds(d0, want), holds(c0, want); w || c {
			t.Errorf("desired with %s changed: whole copy holds %v, compacted %v; want neither", name, w, c)
		}
	}

	// Another manager's updates to the cluster's object.
	ctx := context.Background()
	edits := []struct {
		name  string
		edit  func(*appsv1.Deployment)
		held  bool // what the compacted copy answers
		whole bool // what the whole copy answers, when it differs
	}{
		{"a field the operator does not set", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		}, true, false},
		{"the image", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = testutil.Image("evil")
		}, false, false},
		{"privilege escalation", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}, false, false},
		{"the Secret mounted", func(d *appsv1.Deployment) {
			for i := range d.Spec.Template.Spec.Volumes {
				if s := d.Spec.Template.Spec.Volumes[i].Secret; s != nil {
					s.SecretName = "someone-elses"
				}
			}
		}, false, false},
		{"a volume source", func(d *appsv1.Deployment) {
			for i := range d.Spec.Template.Spec.Volumes {
				if d.Spec.Template.Spec.Volumes[i].EmptyDir != nil {
					d.Spec.Template.Spec.Volumes[i].EmptyDir = nil
					d.Spec.Template.Spec.Volumes[i].HostPath = &corev1.HostPathVolumeSource{Path: "/"}
				}
			}
			// The whole copy sees this one since /tmp has a medium and
			// a size; an empty emptyDir ({}) it missed, derivative
			// taking an empty object as "nothing set".
		}, false, false},
	}
	for _, e := range edits {
		// Each edit starts from the object as the operator applied it.
		recreate(t, f, &desired)
		d := live()
		patch := client.MergeFrom(d.DeepCopy())
		e.edit(d)
		if err := f.cl.Patch(ctx, d, patch, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		edited := live()
		wantWhole := e.held || e.whole
		if w, c := holds(edited, &desired), holds(compacted(edited), &desired); w != wantWhole || c != e.held {
			t.Errorf("after an update of %s: whole copy holds %v, compacted %v; want %v and %v", e.name, w, c, wantWhole, e.held)
		}
	}

	// An item another manager added to a list the operator sets.
	recreate(t, f, &desired)
	d := live()
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if err := f.cl.Patch(ctx, d, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	edited := live()
	if w, c := holds(edited, &desired), holds(compacted(edited), &desired); w || !c {
		t.Errorf("after another manager added a volume: whole copy holds %v (want false), compacted %v (want true)", w, c)
	}
	if _, err := apply(ctx, f.cl, desiredFor(t, &desired)); err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, v := range live().Spec.Template.Spec.Volumes {
		kept = kept || v.Name == "extra"
	}
	if !kept {
		t.Error("applying desired removed another manager's volume; the compacted answer would then hide a difference apply can fix")
	}
}

// recreate replaces the plugin's Deployment with desired, applied by the
// operator's field manager alone.
func recreate(t *testing.T, f *fixture, desired *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	if err := f.cl.Delete(ctx, desiredFor(t, desired)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "Deployment deleted", func() (bool, string) {
		return !f.exists(desired.Labels[plugins.LabelPluginName], &appsv1.Deployment{}), "still there"
	})
	if _, err := apply(ctx, f.cl, desiredFor(t, desired)); err != nil {
		t.Fatal(err)
	}
}

// cachedCopy is obj as the operator compares it (compactOwned on a
// copy), failing t unless its spec was left out for a digest.
func cachedCopy[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	c := obj.DeepCopyObject().(T)
	compactOwned(c)
	if _, ok := c.GetAnnotations()[CachedSpecDigestAnnotation]; !ok {
		t.Fatalf("the cache's copy was not compacted: %s", describeJSON(c.GetAnnotations()))
	}
	return c
}

// desiredFor is a copy of desired to apply (applyIfChanged reads into its
// argument's copy; the test's desired stays untouched).
func desiredFor(t *testing.T, desired *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	d := desired.DeepCopy()
	d.ResourceVersion = ""
	return d
}

// TestCompactedNetworkPolicyHolds: the cache's copy of a plugin's
// NetworkPolicy holds its spec as a digest (OF-16), and an edit by another
// manager that widens what the plugin may reach shows as a difference that
// the operator's next apply removes, for the running plugin's policy and
// for the deny-all one of a plugin that runs nothing.
func TestCompactedNetworkPolicyHolds(t *testing.T) {
	f := newFixture(t)
	p := f.run(testutil.MakePlugin("compactnp", testutil.Image("compactnp-1")).Egress("api.nbp.pl").Obj())
	f.operator.stop() // the test's own edits must stay as made
	ctx := context.Background()

	live := func() *networkingv1.NetworkPolicy {
		var np networkingv1.NetworkPolicy
		f.exists(p.Name, &np)
		return &np
	}
	compacted := func(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy { return cachedCopy(t, np) }
	running := live()
	desired := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: running.Name, Namespace: running.Namespace, Labels: running.Labels,
			OwnerReferences: running.OwnerReferences},
		Spec: *running.Spec.DeepCopy(),
	}
	if len(desired.Spec.Egress) == 0 || len(desired.Spec.Egress[0].To) == 0 {
		t.Fatalf("the running plugin's policy allows no egress: %s", describeJSON(desired.Spec))
	}
	if !holds(running, desired) || !holds(compacted(running), desired) {
		t.Fatalf("desired not held: whole %v, compacted %v", holds(running, desired), holds(compacted(running), desired))
	}

	widen := []struct {
		name  string
		edit  func(*networkingv1.NetworkPolicy)
		whole bool // what comparing whole objects answered
	}{
		{"a peer's namespaces", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[0].To[0].NamespaceSelector = &metav1.LabelSelector{}
		}, true},
		{"an egress rule to anywhere", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
		}, false},
	}
	for _, w := range widen {
		if _, err := apply(ctx, f.cl, desired.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		np := live()
		patch := client.MergeFrom(np.DeepCopy())
		w.edit(np)
		if err := f.cl.Patch(ctx, np, patch, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		edited := live()
		if whole, c := holds(edited, desired), holds(compacted(edited), desired); whole != w.whole || c {
			t.Errorf("after widening %s: whole copy holds %v (want %v), compacted %v (want false)", w.name, whole, w.whole, c)
		}
		if _, err := apply(ctx, f.cl, desired.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if back := live(); !holds(compacted(back), desired) {
			t.Errorf("after widening %s, apply did not restore the policy: %s", w.name, describeJSON(back.Spec))
		}
	}

	// The policy of a plugin that runs nothing: a rule added to it must go.
	denyAll := DenyAllNetworkPolicy(p)
	if _, err := apply(ctx, f.cl, denyAll.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if np := live(); !holds(compacted(np), denyAll) || len(np.Spec.Egress)+len(np.Spec.Ingress) != 0 {
		t.Fatalf("deny-all not held or not empty: %s", describeJSON(np.Spec))
	}
	np := live()
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	if err := f.cl.Patch(ctx, np, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	if edited := live(); holds(edited, denyAll) || holds(compacted(edited), denyAll) {
		t.Errorf("an egress rule added to deny-all: whole copy holds %v, compacted %v; want neither", holds(edited, denyAll), holds(compacted(edited), denyAll))
	}
	if _, err := apply(ctx, f.cl, denyAll.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if back := live(); len(back.Spec.Egress) != 0 {
		t.Errorf("apply kept the egress rule another manager added to deny-all: %s", describeJSON(back.Spec))
	}
}
