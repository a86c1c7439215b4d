package operator

import (
	"context"
	"crypto/sha256"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// What one Plugin reconcile (Reconcile) does to the cluster once it has
// planned: apply the workload of the version that runs, park it while the
// core's or the proxy's Service is unusable, or tear it down. The writes
// themselves, each only when it changes something, are applyifchanged.go.

// applyPlan makes the cluster match the plan: the workload of whatever runs,
// or a deny-all NetworkPolicy alone when nothing does; and the allow-list
// entry of a running plugin, or none.
func (r *PluginReconciler) applyPlan(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	if !ps.plan.Outcome.Runs() {
		return r.tearDown(ctx, p)
	}
	cluster, err := r.Cluster.Read(ctx, r.Client)
	if err == nil {
		var w plugins.Workload
		if w, err = plugins.Compile(*ps.plan.Effective, cluster.Topology); err == nil {
			return r.applyWorkload(ctx, p, ps, w, cluster)
		}
	}
	// Fail closed: without the core's and proxy's addresses the policy
	// cannot be written, so nothing runs; but the episode is transient, so
	// the record of what ran stays (OF-2).
	ps.clusterErr = err
	return r.park(ctx, p)
}

// applyWorkload applies the running version's objects and its allow-list
// entry. The allow-list goes first, so a narrowed grant closes hosts before
// anything else changes.
func (r *PluginReconciler) applyWorkload(ctx context.Context, p *v1alpha1.Plugin, ps *pass, w plugins.Workload, c Cluster) error {
	if err := r.AllowList.Set(ctx, p.Name, w.AllowList); err != nil {
		return err
	}
	rec, raw, err := r.nextRecord(ctx, p, ps)
	if err != nil {
		return err
	}
	config := ps.plan.Run.Config
	build := func(g IsolationGate) Objects {
		cg := c
		cg.Gate = g
		objs := BuildObjects(p, ps.plan.Run.Image.String(), config, w, cg)
		setVerifiedVersion(objs.Deployment, raw)
		return objs
	}
	objs := build(c.Gate)
	if objs, err = r.keepGate(ctx, p, c.Gate, objs, build); err != nil {
		return err
	}
	for _, obj := range objs.List() {
		if _, err := r.owned.applyIfChanged(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	ps.deployed = rec
	if f := r.owned.lastSeenDeployment(p.Name); f != nil {
		ps.available = f.available
	}
	return nil
}

// keepGate returns the objects to apply with the isolation gate the plugin's
// Deployment runs now, when keepRunningGate says to keep it. Only a
// Deployment whose gate differs from the operator's, from the same
// repository, is read whole for it (a release's upgrade); any other
// returns want.
func (r *PluginReconciler) keepGate(ctx context.Context, p *v1alpha1.Plugin, gate IsolationGate, want Objects, build func(IsolationGate) Objects) (Objects, error) {
	f, _, err := r.owned.deployment(ctx, p.Name)
	if err != nil || f == nil || gate.Disabled || f.gate == "" || f.gate == gate.Image || !sameRepository(f.gate, gate.Image) {
		return want, err
	}
	current, err := r.owned.wholeDeployment(ctx, p.Name)
	if err != nil || current == nil {
		return want, err
	}
	compactOwned(current)
	return keepRunningGate(current, gate, want, build), nil
}

// park stops what runs while the core's or the proxy's Service is unusable
// (ClusterUnavailable) and keeps the record of what ran: the allow-list entry
// goes, the NetworkPolicy denies everything and the Deployment is scaled to
// zero, its pod template and the record in it as they were. Once the
// Services are back the same version resumes, without the owner acting
// (OF-2). The ServiceAccount, ConfigMap and Service stay; no pod uses them.
func (r *PluginReconciler) park(ctx context.Context, p *v1alpha1.Plugin) error {
	if err := r.AllowList.Remove(ctx, p.Name); err != nil {
		return err
	}
	if _, err := r.owned.applyIfChanged(ctx, r.Client, DenyAllNetworkPolicy(p)); err != nil {
		return err
	}
	f, _, err := r.owned.deployment(ctx, p.Name)
	if err != nil || f == nil || f.scaledToZero {
		return err
	}
	d := pluginDeployment(p.Name)
	if err := r.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("scale Deployment %s to zero: %w", d.Name, err)
	}
	r.owned.remember(d, [sha256.Size]byte{})
	return nil
}

// tearDown removes everything but a deny-all NetworkPolicy, and the
// allow-list entry, so revocation is immediate (D-16).
func (r *PluginReconciler) tearDown(ctx context.Context, p *v1alpha1.Plugin) error {
	if err := r.AllowList.Remove(ctx, p.Name); err != nil {
		return err
	}
	if _, err := r.owned.applyIfChanged(ctx, r.Client, DenyAllNetworkPolicy(p)); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(p.Name)}
	meta := metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta},
		&corev1.ConfigMap{ObjectMeta: meta}, &corev1.ServiceAccount{ObjectMeta: meta},
	} {
		if _, err := r.owned.deleteIfExists(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	return nil
}
