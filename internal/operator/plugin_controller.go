package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/configschema"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
)

// The operator's Role, generated into deploy/operator/role.yaml (D-15): all
// of it in the openfief namespace, and no access to Secrets at all (D-29).
//
// +kubebuilder:rbac:groups=openfief.io,namespace=openfief,resources=plugins;plugingrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=openfief.io,namespace=openfief,resources=plugins/status;plugingrants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=openfief.io,namespace=openfief,resources=plugins/finalizers,verbs=update
// +kubebuilder:rbac:groups="",namespace=openfief,resources=serviceaccounts;configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,namespace=openfief,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=openfief,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=openfief,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=openfief,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=openfief,resources=leases,verbs=get;list;watch;create;update;patch;delete

// PluginReconciler runs each Plugin with exactly what both it and its
// PluginGrant allow (D-13, D-16). It converts the resources into domain
// values, asks the domain which version runs and with what, and maps the
// answer onto Kubernetes objects. It decides nothing itself.
type PluginReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Images checks signatures and signed manifests (D-57: PolicyVerifier in
	// the binary).
	Images trust.ImageChecker
	// Cluster names the core's and the egress proxy's Services.
	Cluster ClusterConfig
	// Now stamps status.deployed.verifiedAt; time.Now when nil.
	Now func() time.Time
	// MaxConcurrentReconciles is how many Plugins reconcile at once
	// (DefaultMaxConcurrentReconciles when not positive), so one slow
	// Plugin (a slow registry, a costly config schema) never holds up
	// another's revocation (review finding 2).
	MaxConcurrentReconciles int
	// ReconcileTimeout bounds one reconcile's context
	// (DefaultReconcileTimeout when not positive).
	ReconcileTimeout time.Duration
}

// SetupWithManager registers the PluginReconciler. A Plugin reconciles on a
// change to itself or to any of the five objects it owns (so a hand edit is
// re-applied), on a change to the PluginGrant of the same name, and, for
// every Plugin, on a change to the core's or the proxy's Service or to the
// allow-list ConfigMap. Requests outside openfief are ignored.
func (r *PluginReconciler) SetupWithManager(mgr ctrl.Manager) error {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == plugins.Namespace })
	everyPlugin := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1alpha1.PluginList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
		return reqs
	})
	named := func(names ...string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool {
			for _, n := range names {
				if o.GetName() == n {
					return true
				}
			}
			return false
		})
	}
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = DefaultMaxConcurrentReconciles
	}
	timeout := r.ReconcileTimeout
	if timeout <= 0 {
		timeout = DefaultReconcileTimeout
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("plugin").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, ReconciliationTimeout: timeout}).
		For(&v1alpha1.Plugin{}, builder.WithPredicates(inNamespace)).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&appsv1.Deployment{}).
		Watches(&v1alpha1.PluginGrant{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(inNamespace)).
		Watches(&corev1.Service{}, everyPlugin, builder.WithPredicates(inNamespace, named(r.Cluster.CoreService, r.Cluster.ProxyService))).
		Watches(&corev1.ConfigMap{}, allowListChanges(everyPlugin), builder.WithPredicates(inNamespace, named(plugins.AllowListConfigMap))).
		Complete(r)
}

// pass is what one reconcile learns, step by step, before it writes status.
type pass struct {
	name string

	current       *plugins.Version
	deployable    bool
	notDeployable condition // why current cannot run, when it cannot
	signature     condition
	verification  trust.Verification

	previous          *plugins.Version
	previousIsCurrent bool
	previousErr       string

	plan       plugins.RolloutPlan
	clusterErr error
	applyErr   error
	available  bool
	requeue    time.Duration
}

// whyNotCurrent says, for RunningPreviousVersion, why the current spec does
// not run.
func (p *pass) whyNotCurrent() string {
	if p.current != nil && p.deployable && !p.plan.Pending.IsEmpty() {
		return "the current spec waits for approval of " + p.plan.Pending.String()
	}
	if p.notDeployable.message != "" {
		return "the current spec cannot run: " + p.notDeployable.message
	}
	return "the current spec cannot run"
}

// Reconcile reads a Plugin and its grant, plans which version runs, applies
// or tears down its workload, publishes its allow-list and writes status
// once. It is level-triggered: it re-reads everything on every pass.
func (r *PluginReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != plugins.Namespace {
		return ctrl.Result{}, nil // D-15: nothing outside openfief is ours
	}
	var p v1alpha1.Plugin
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			// Owned objects go by garbage collection; the allow-list key has
			// no owner reference, so it is removed here (D-58, part).
			return ctrl.Result{}, removeAllowList(ctx, r.Client, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, removeAllowList(ctx, r.Client, p.Name)
	}

	ps := &pass{name: p.Name}
	grant, err := r.fetchGrant(ctx, p.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.checkCurrent(ctx, &p, ps)
	r.checkPrevious(ctx, &p, ps)
	ps.plan = plugins.PlanRollout(plugins.RolloutInput{
		Current: ps.current, CurrentDeployable: ps.deployable, Previous: ps.previous, Grant: grant,
	})
	if err := r.applyPlan(ctx, &p, ps); err != nil {
		// Say why on the Plugin too, then retry with backoff. What runs is
		// unknown until an apply succeeds, so status.deployed stays as it was.
		ps.applyErr = err
		if serr := r.writeStatus(ctx, &p, ps); serr != nil {
			log.FromContext(ctx).Error(serr, "write status after a failed apply")
		}
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, &p, ps); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: ps.requeue}, nil
}

// fetchGrant returns the grant of the same name, nil when there is none.
func (r *PluginReconciler) fetchGrant(ctx context.Context, name string) (*plugins.Grant, error) {
	var g v1alpha1.PluginGrant
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &g); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read grant: %w", err)
	}
	out := apiconv.GrantFromAPI(&g)
	return &out, nil
}

// checkCurrent validates the spec and its config and checks its image. It
// sets SignatureVerified and decides whether the current version is
// deployable: valid spec, config matching its schema, and a True signature
// check (D-57).
func (r *PluginReconciler) checkCurrent(ctx context.Context, p *v1alpha1.Plugin, ps *pass) {
	dp := apiconv.PluginFromAPI(p)
	ref, refErr := plugins.ParseImageRef(dp.Image)
	if err := dp.Validate(); err != nil {
		ps.notDeployable = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, err.Error()}
		if refErr != nil {
			ps.signature = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidImage, refErr.Error()}
		} else {
			ps.signature = condition{metav1.ConditionUnknown, v1alpha1.ReasonInvalidSpec, "not checked: the spec is invalid"}
		}
		return
	}
	ps.current = &plugins.Version{Name: dp.Name, Image: ref, Manifest: dp.Manifest, Config: dp.Config}

	v := r.Images.Check(ctx, ref, &dp.Manifest)
	ps.verification = v
	ps.signature = condition{v.Status, v.Reason, v.Message}
	if v.Status == metav1.ConditionUnknown {
		ps.requeue = trust.RegistryRetryInterval
		if sameAsDeployed(ps.current, p.Status.Deployed) {
			// Fail static (OF-2): this exact version was verified
			// before; an unreachable registry does not stop it.
			ps.verification.Status, ps.verification.Signer = metav1.ConditionTrue, p.Status.Deployed.Signer
			ps.signature.message += fmt.Sprintf("; the running version was verified at %s and keeps running", verifiedAt(p.Status.Deployed))
		}
	}
	if err := configschema.Validate(dp.Manifest.ConfigSchema, dp.Config); err != nil {
		ps.notDeployable = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidConfig, err.Error()}
		return
	}
	if !ps.verification.Verified() {
		ps.notDeployable = condition{metav1.ConditionFalse, v1alpha1.ReasonSignatureNotVerified, v.Message}
		return
	}
	ps.deployable = true
}

// checkPrevious reads the version that runs now from status.deployed and
// checks its image again before it may keep running. An unreachable
// registry keeps it (it was verified before); a definite refusal drops it.
func (r *PluginReconciler) checkPrevious(ctx context.Context, p *v1alpha1.Plugin, ps *pass) {
	d := p.Status.Deployed
	if d == nil {
		return
	}
	ref, err := plugins.ParseImageRef(d.Image)
	prev := plugins.Version{Name: p.Name, Image: ref, Manifest: apiconv.ManifestFromAPI(d.Manifest), Config: apiconv.RawJSON(d.Config)}
	if err == nil {
		err = prev.Manifest.Validate()
	}
	if err != nil {
		ps.previousErr = "the running version recorded in status.deployed is invalid: " + err.Error()
		return
	}
	// The same version as the current spec was checked a moment ago.
	v := ps.verification
	if ps.previousIsCurrent = sameAsDeployed(ps.current, d); !ps.previousIsCurrent {
		v = r.Images.Check(ctx, ref, &prev.Manifest)
	}
	switch v.Status {
	case metav1.ConditionTrue:
		ps.previous = &prev
	case metav1.ConditionUnknown:
		ps.previous = &prev // verified when it was deployed (OF-2)
		ps.requeue = trust.RegistryRetryInterval
	default:
		ps.previousErr = "the running version's image is refused: " + v.Message
	}
}

// sameAsDeployed reports whether v is exactly the version status.deployed records.
func sameAsDeployed(v *plugins.Version, d *v1alpha1.DeployedVersion) bool {
	if v == nil || d == nil || d.VerifiedAt == nil {
		return false
	}
	return v.Image.String() == d.Image && v.Manifest.Equal(apiconv.ManifestFromAPI(d.Manifest)) && plugins.EqualConfig(v.Config, apiconv.RawJSON(d.Config))
}

func verifiedAt(d *v1alpha1.DeployedVersion) string {
	if d == nil || d.VerifiedAt == nil {
		return "an earlier pass"
	}
	return d.VerifiedAt.UTC().Format(time.RFC3339)
}

// applyPlan makes the cluster match the plan: the workload of whatever runs,
// or a deny-all NetworkPolicy alone when nothing does; and the allow-list
// entry of a running plugin, or none.
func (r *PluginReconciler) applyPlan(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	if ps.plan.Outcome.Runs() {
		cluster, err := r.Cluster.Read(ctx, r.Client)
		if err == nil {
			var w plugins.Workload
			if w, err = plugins.Compile(*ps.plan.Effective, cluster.Topology); err == nil {
				return r.applyWorkload(ctx, p, ps, w, cluster)
			}
		}
		// Fail closed: without the core's and proxy's addresses the policy
		// cannot be written, so nothing runs.
		ps.clusterErr = err
	}
	return r.tearDown(ctx, p)
}

// applyWorkload applies the running version's objects and its allow-list
// entry. The allow-list goes first, so a narrowed grant closes hosts before
// anything else changes.
func (r *PluginReconciler) applyWorkload(ctx context.Context, p *v1alpha1.Plugin, ps *pass, w plugins.Workload, c Cluster) error {
	if err := applyAllowList(ctx, r.Client, p.Name, w.AllowList); err != nil {
		return err
	}
	config := ps.plan.Run.Config
	objs := BuildObjects(p, ps.plan.Run.Image.String(), config, w, c)
	for _, obj := range objs.List() {
		if _, err := applyIfChanged(ctx, r.Client, obj); err != nil {
			return err
		}
	}
	var dep appsv1.Deployment
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(objs.Deployment), &dep); err == nil {
		ps.available = deploymentAvailable(&dep)
	}
	return nil
}

// tearDown removes everything but a deny-all NetworkPolicy, and the
// allow-list entry, so revocation is immediate (D-16).
func (r *PluginReconciler) tearDown(ctx context.Context, p *v1alpha1.Plugin) error {
	if err := removeAllowList(ctx, r.Client, p.Name); err != nil {
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

// writeStatus computes the new status and patches it only when it differs
// from what the cache holds (OF-4).
func (r *PluginReconciler) writeStatus(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	next := p.Status.DeepCopy()
	next.ObservedGeneration = p.Generation
	setCondition(&next.Conditions, v1alpha1.ConditionSignatureVerified, ps.signature, p.Generation)
	setCondition(&next.Conditions, v1alpha1.ConditionApprovalRequired, approvalCondition(ps.current, ps.plan.Pending), p.Generation)
	setCondition(&next.Conditions, v1alpha1.ConditionReady, readyCondition(ps), p.Generation)
	next.PendingApproval = apiconv.PendingToAPI(ps.plan.Pending)
	next.Effective = nil
	switch {
	case ps.applyErr != nil:
		// Keep deployed and effective as they were.
		next.Effective = p.Status.Effective
	case ps.plan.Outcome.Runs() && ps.clusterErr == nil:
		next.Effective = apiconv.EffectiveToAPI(ps.plan.Effective)
		next.Deployed = r.deployedRecord(p.Status.Deployed, ps)
	default:
		next.Deployed = nil
	}
	if equality.Semantic.DeepEqual(&p.Status, next) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status = *next
	if err := r.Client.Status().Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	log.FromContext(ctx).V(1).Info("status written", "ready", readyCondition(ps).reason)
	return nil
}

// deployedRecord is status.deployed for what runs: a new record when the
// current version starts running, the old one while the previous keeps
// running.
func (r *PluginReconciler) deployedRecord(old *v1alpha1.DeployedVersion, ps *pass) *v1alpha1.DeployedVersion {
	if ps.plan.Outcome == plugins.RolloutPrevious || sameAsDeployed(ps.current, old) {
		return old
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	run := ps.plan.Run
	rec := &v1alpha1.DeployedVersion{
		Image:      run.Image.String(),
		Manifest:   apiconv.ManifestToAPI(run.Manifest),
		Signer:     ps.verification.Signer,
		Trust:      ps.verification.Reason,
		VerifiedAt: &metav1.Time{Time: now().UTC().Truncate(time.Second)},
	}
	if len(run.Config) > 0 {
		rec.Config = &apiextensionsv1.JSON{Raw: append([]byte(nil), run.Config...)}
	}
	return rec
}

// allowListChanges maps events of the allow-list ConfigMap to Plugins. A
// created or deleted ConfigMap reconciles every Plugin (all), an update only
// the Plugins whose entries changed: each Plugin's own apply changes only its
// own key, so a pass over every Plugin on every apply would make the work
// grow with the square of the number of Plugins. A hand edit or deletion of
// an entry still reaches the Plugin it belongs to, which restores it.
func allowListChanges(all handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc:  all.Create,
		DeleteFunc:  all.Delete,
		GenericFunc: all.Generic,
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldCM, ok1 := e.ObjectOld.(*corev1.ConfigMap)
			newCM, ok2 := e.ObjectNew.(*corev1.ConfigMap)
			if !ok1 || !ok2 {
				return
			}
			for _, name := range changedKeys(oldCM.Data, newCM.Data) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: plugins.Namespace, Name: name}})
			}
		},
	}
}

// changedKeys lists the keys whose values differ between a and b, or that
// only one of them has, sorted.
func changedKeys(a, b map[string]string) []string {
	set := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			set[k] = true
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
