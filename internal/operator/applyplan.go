package operator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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
	var current appsv1.Deployment
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(objs.Deployment), &current); {
	case err == nil:
		objs = keepRunningGate(&current, c.Gate, objs, build)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read Deployment %s: %w", objs.Deployment.Name, err)
	}
	for _, obj := range objs.List() {
		if _, err := applyIfChanged(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	ps.deployed = rec
	var dep appsv1.Deployment
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(objs.Deployment), &dep); err == nil {
		ps.available = deploymentAvailable(&dep)
	}
	return nil
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
	if _, err := applyIfChanged(ctx, r.Client, DenyAllNetworkPolicy(p)); err != nil {
		return err
	}
	var d appsv1.Deployment
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(p.Name)}
	if err := r.Client.Get(ctx, key, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read Deployment %s: %w", key.Name, err)
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
		return nil
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](0)
	if err := r.Client.Patch(ctx, &d, patch, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("scale Deployment %s to zero: %w", d.Name, err)
	}
	return nil
}

// tearDown removes everything but a deny-all NetworkPolicy, and the
// allow-list entry, so revocation is immediate (D-16).
func (r *PluginReconciler) tearDown(ctx context.Context, p *v1alpha1.Plugin) error {
	if err := r.AllowList.Remove(ctx, p.Name); err != nil {
		return err
	}
	if _, err := applyIfChanged(ctx, r.Client, DenyAllNetworkPolicy(p)); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(p.Name)}
	meta := metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta},
		&corev1.ConfigMap{ObjectMeta: meta}, &corev1.ServiceAccount{ObjectMeta: meta},
	} {
		if _, err := deleteIfExists(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	return nil
}

// deploymentAvailable reports whether the Deployment controller has seen the
// latest spec and reports it Available with its one replica updated.
func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < 1 {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
