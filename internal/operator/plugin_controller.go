package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
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
	// The cache holds the openfief namespace only (D-15), and cut-down
	// copies (cacheOptions, OF-15, OF-16): managed fields dropped but the
	// operator's own applied pull Secrets, a Deployment's pod spec and a
	// NetworkPolicy's spec replaced by their digests
	// (CachedSpecDigestAnnotation), and repeated strings shared. So what
	// Client reads is compared with desired objects by holds, never
	// written back whole.
	Client client.Client
	// Reader reads the objects a plugin owns whole from the API server
	// itself: the caches hold their metadata only (ownedobjects.go), and
	// may not have seen what the pass before applied. The manager's
	// APIReader when nil.
	Reader client.Reader
	// Images checks signatures and signed manifests (D-57: PolicyVerifier in
	// the binary).
	Images trust.ImageChecker
	// Cluster names the core's and the egress proxy's Services.
	Cluster ClusterConfig
	// Now stamps the verifiedAt of a new verified-version record
	// (AnnotationVerifiedVersion) and the firstRan and lastRan of
	// status.history; time.Now when nil.
	Now func() time.Time
	// MaxConcurrentReconciles is how many Plugins reconcile at once
	// (DefaultMaxConcurrentReconciles when not positive), so one slow
	// Plugin (a slow registry, a costly config schema) never holds up
	// another's revocation.
	MaxConcurrentReconciles int
	// ReconcileTimeout bounds one reconcile's context
	// (DefaultReconcileTimeout when not positive).
	ReconcileTimeout time.Duration
	// RegistryRetry is how soon a Plugin whose image's registry could not
	// be read is reconciled again (DefaultRegistryRetry when not positive).
	RegistryRetry time.Duration
	// AllowList writes the plugin's key of the egress allow-list (D-32,
	// OF-15).
	AllowList *AllowListWriter
	// Recorder records the Events of what the reconciler decides, once per
	// change of status (events.go); none when nil.
	Recorder events.EventRecorder

	// signers, when set, follows the owner's signers ConfigMap and swaps
	// Images' policy as it changes, then queues every Plugin (OF-31).
	signers *ownerSigners
	// roots, when set, follows the admin's Sigstore root ConfigMap and
	// rebuilds Images' registry readers as it changes, then queues every
	// Plugin.
	roots *trustRoots
	// owned is what the operator knows of the objects plugins own, watched
	// as metadata only (ownedobjects.go); SetupWithManager builds it.
	owned *ownedObjects
}

// SetupWithManager registers the PluginReconciler. A Plugin reconciles on a
// change to itself or to any of the five objects it owns (watched as
// metadata only, ownedcache.go; so a hand edit is re-applied), on a change to the PluginGrant of the same name (its
// deletion or a change of its spec ahead of everything else queued, OF-15),
// and, for
// every Plugin, on a change to the core's or the proxy's Service or to the
// allow-list ConfigMap, and, when it follows them, on a change of the
// owner's trusted signers (ahead of everything else queued, OF-31) or of
// the admin's Sigstore root (likewise).
// Requests outside openfief are ignored.
func (r *PluginReconciler) SetupWithManager(mgr ctrl.Manager) error {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == plugins.Namespace })
	listPlugins := func(ctx context.Context) []reconcile.Request {
		var list v1alpha1.PluginList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(plugins.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
		return reqs
	}
	everyPlugin := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return listPlugins(ctx)
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
	b := ctrl.NewControllerManagedBy(mgr).
		Named("plugin").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, ReconciliationTimeout: timeout, UsePriorityQueue: ptr.To(true)}).
		For(&v1alpha1.Plugin{}, builder.WithPredicates(inNamespace)).
		Watches(&v1alpha1.PluginGrant{}, grantChanges(), builder.WithPredicates(inNamespace)).
		Watches(&corev1.Service{}, everyPlugin, builder.WithPredicates(inNamespace, named(r.Cluster.CoreService, r.Cluster.ProxyService))).
		Watches(&corev1.ConfigMap{}, allowListChanges(everyPlugin), builder.WithPredicates(inNamespace, named(plugins.AllowListConfigMap)))
	if r.signers != nil {
		b = b.Watches(&corev1.ConfigMap{}, r.signers.changes(listPlugins), builder.WithPredicates(inNamespace, named(plugins.OwnerSignersConfigMap)))
	}
	if r.roots != nil {
		b = b.Watches(&corev1.ConfigMap{}, r.roots.changes(listPlugins), builder.WithPredicates(inNamespace, named(plugins.TrustRootConfigMap)))
	}
	owned, err := newOwnedCache(mgr)
	if err != nil {
		return err
	}
	watches, err := ownedWatches(mgr, owned)
	if err != nil {
		return err
	}
	for _, w := range watches {
		b = b.WatchesRawSource(w)
	}
	live := r.Reader
	if live == nil {
		live = mgr.GetAPIReader()
	}
	r.owned = newOwnedObjects(owned, live)
	return b.Complete(r)
}

// pass is what one reconcile learns, step by step, before it writes status.
type pass struct {
	name string

	current       *plugins.Version
	deployable    bool
	notDeployable condition // why current cannot run, when it cannot
	signature     condition
	verification  trust.Verification

	// running is the record of the version that runs, read from the
	// plugin's Deployment (AnnotationVerifiedVersion), never from
	// status.deployed (OF-2); nil when nothing runs.
	running *verifiedVersion
	// readLive says running was read from the API server, not the cache
	// (readRunning), so it cannot be stale.
	readLive             bool
	previous             *plugins.Version
	previousIsCurrent    bool
	previousErr          string
	previousVerification trust.Verification
	// deployed is the record the applied Deployment carries.
	deployed *v1alpha1.DeployedVersion

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
	if p.plan.Err != nil {
		// Such as more hosts of the owner's choosing than the current
		// version has slots for (OF-36).
		return "the current spec cannot run: " + p.plan.Err.Error()
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
			r.owned.forgetPlugin(req.Name)
			return ctrl.Result{}, r.AllowList.Remove(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		r.owned.forgetPlugin(p.Name)
		return ctrl.Result{}, r.AllowList.Remove(ctx, p.Name)
	}

	ps := &pass{name: p.Name}
	grant, err := r.fetchGrant(ctx, p.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.readRunning(ctx, &p, ps); err != nil {
		return ctrl.Result{}, err
	}
	r.checkCurrent(ctx, &p, ps)
	r.checkPrevious(ctx, ps)
	ps.plan = plugins.PlanRollout(plugins.RolloutInput{
		Current: ps.current, CurrentDeployable: ps.deployable, Previous: ps.previous, Grant: grant,
	})
	if err := r.applyPlan(ctx, &p, ps); err != nil {
		// Say why on the Plugin too, then retry with backoff. The Deployment
		// goes last, so it still runs the version its record names.
		ps.applyErr = err
		if serr := r.writeStatus(ctx, &p, ps); serr != nil {
			ctrllog.FromContext(ctx).Error(serr, "write status after a failed apply")
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
