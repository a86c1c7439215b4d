package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// The cache holds the openfief namespace only (D-15), and cut-down
	// copies (cacheOptions, OF-15, OF-16): managed fields dropped but the
	// operator's own applied pull Secrets, a Deployment's pod spec and a
	// NetworkPolicy's spec replaced by their digests
	// (CachedSpecDigestAnnotation), and repeated strings shared. So what
	// Client reads is compared with desired objects by holds, never
	// written back whole.
	Client client.Client
	// Reader reads whole objects from the API server itself, past the
	// cache, which may not have seen what the pass before applied. It is
	// used twice: for the plugin's Deployment when the cache has none
	// (readRunning), and, unless that read was live already, before a new
	// verified-version record is stamped (nextRecord). The manager's
	// APIReader; Client when nil.
	Reader client.Reader
	// Images checks signatures and signed manifests (D-57: PolicyVerifier in
	// the binary).
	Images trust.ImageChecker
	// Cluster names the core's and the egress proxy's Services.
	Cluster ClusterConfig
	// Now stamps the verifiedAt of a new verified-version record
	// (AnnotationVerifiedVersion); time.Now when nil.
	Now func() time.Time
	// MaxConcurrentReconciles is how many Plugins reconcile at once
	// (DefaultMaxConcurrentReconciles when not positive), so one slow
	// Plugin (a slow registry, a costly config schema) never holds up
	// another's revocation.
	MaxConcurrentReconciles int
	// ReconcileTimeout bounds one reconcile's context
	// (DefaultReconcileTimeout when not positive).
	ReconcileTimeout time.Duration
	// AllowList writes the plugin's key of the egress allow-list (D-32,
	// OF-15).
	AllowList *AllowListWriter
	// Recorder records the Events of what the reconciler decides, once per
	// change of status (events.go); none when nil.
	Recorder events.EventRecorder

	// signers, when set, follows the owner's signers ConfigMap and swaps
	// Images' policy as it changes, then queues every Plugin (OF-31).
	signers *ownerSigners
}

// SetupWithManager registers the PluginReconciler. A Plugin reconciles on a
// change to itself or to any of the five objects it owns (so a hand edit is
// re-applied), on a change to the PluginGrant of the same name (its
// deletion or a change of its spec ahead of everything else queued, OF-15),
// and, for
// every Plugin, on a change to the core's or the proxy's Service or to the
// allow-list ConfigMap, and, when it follows them, on a change of the
// owner's trusted signers (ahead of everything else queued, OF-31).
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
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&appsv1.Deployment{}).
		Watches(&v1alpha1.PluginGrant{}, grantChanges(), builder.WithPredicates(inNamespace)).
		Watches(&corev1.Service{}, everyPlugin, builder.WithPredicates(inNamespace, named(r.Cluster.CoreService, r.Cluster.ProxyService))).
		Watches(&corev1.ConfigMap{}, allowListChanges(everyPlugin), builder.WithPredicates(inNamespace, named(plugins.AllowListConfigMap)))
	if r.signers != nil {
		b = b.Watches(&corev1.ConfigMap{}, r.signers.changes(listPlugins), builder.WithPredicates(inNamespace, named(plugins.OwnerSignersConfigMap)))
	}
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
			return ctrl.Result{}, r.AllowList.Remove(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
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
		if rec := ps.running.trusted(); sameAsDeployed(ps.current, rec) {
			// Fail static (OF-2): the operator verified this exact
			// version and runs it; an unreachable registry does not stop it.
			ps.verification.Status, ps.verification.Signer = metav1.ConditionTrue, rec.Signer
			ps.signature.message += fmt.Sprintf("; the running version was verified at %s and keeps running", verifiedAt(rec))
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

// readRunning reads the record of the version that runs from the plugin's
// Deployment (AnnotationVerifiedVersion), which only the operator may write
// (deploy/admission), and never from status.deployed, which anyone who may
// write plugins/status can set. A Deployment left by
// an operator that kept the record in status only gives a legacy record,
// trusted only once its image verifies again. An invalid record is reported
// and trusted for nothing.
func (r *PluginReconciler) readRunning(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	var d appsv1.Deployment
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(p.Name)}
	err := r.Client.Get(ctx, key, &d)
	if apierrors.IsNotFound(err) {
		// The cache may not have seen the Deployment that the pass before
		// this one created: nothing running would then mean a
		// second record stamped over the first, or a version reported
		// stopped that runs. A plugin without a Deployment costs a live
		// read per pass; one with its Deployment cached, none.
		ps.readLive = true
		err = r.reader().Get(ctx, key, &d)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read Deployment %s: %w", key.Name, err)
	}
	rec, err := readVerifiedVersion(&d, p)
	switch {
	case errors.Is(err, errNoRecord):
		if s := p.Status.Deployed; s != nil && s.VerifiedAt != nil && s.Image == runningImage(&d) {
			ps.running = &verifiedVersion{rec: s.DeepCopy(), legacy: true}
		}
	case err != nil:
		ps.previousErr = fmt.Sprintf("the record of the running version on Deployment %s is invalid: %v", d.Name, err)
	case rec != nil:
		ps.running = &verifiedVersion{rec: rec, raw: d.Spec.Template.Annotations[AnnotationVerifiedVersion]}
	}
	return nil
}

// checkPrevious checks the image of the version that runs (ps.running) again
// before it may keep running. An unreachable registry keeps it, since the
// operator verified it when it deployed it (OF-2), unless the record is a
// legacy one; a definite refusal drops it.
func (r *PluginReconciler) checkPrevious(ctx context.Context, ps *pass) {
	if ps.running == nil {
		return
	}
	d := ps.running.rec
	ref, err := plugins.ParseImageRef(d.Image)
	prev := plugins.Version{Name: ps.name, Image: ref, Manifest: apiconv.ManifestFromAPI(d.Manifest), Config: apiconv.RawJSON(d.Config)}
	if err == nil {
		err = prev.Manifest.Validate()
	}
	if err != nil {
		ps.previousErr = "the record of the running version is invalid: " + err.Error()
		return
	}
	// The same version as the current spec was checked a moment ago.
	v := ps.verification
	if ps.previousIsCurrent = sameAsDeployed(ps.current, d); !ps.previousIsCurrent {
		v = r.Images.Check(ctx, ref, &prev.Manifest)
	}
	ps.previousVerification = v
	switch v.Status {
	case metav1.ConditionTrue:
		ps.previous = &prev
	case metav1.ConditionUnknown:
		ps.requeue = trust.RegistryRetryInterval
		if !ps.running.legacy {
			ps.previous = &prev // verified when the operator deployed it (OF-2)
		}
	default:
		ps.previousErr = "the running version's image is refused: " + v.Message
	}
}

// sameAsDeployed reports whether v is exactly the version d records.
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
	objs := BuildObjects(p, ps.plan.Run.Image.String(), config, w, c)
	setVerifiedVersion(objs.Deployment, raw)
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

// writeStatus computes the new status and patches it only when it differs
// from what the cache holds (OF-4); once the patch succeeds, it records the
// Events of the change (recordEvents), so a steady state records none.
func (r *PluginReconciler) writeStatus(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	next := p.Status.DeepCopy()
	next.ObservedGeneration = p.Generation
	setCondition(&next.Conditions, v1alpha1.ConditionSignatureVerified, ps.signature, p.Generation)
	setCondition(&next.Conditions, v1alpha1.ConditionApprovalRequired, approvalCondition(ps.current, ps.plan.Pending), p.Generation)
	setCondition(&next.Conditions, v1alpha1.ConditionReady, readyCondition(ps), p.Generation)
	next.PendingApproval = apiconv.PendingToAPI(ps.plan.Pending)
	next.Effective = nil
	// status.deployed reports the record on the Deployment; nothing reads
	// it back (OF-2).
	switch {
	case ps.applyErr != nil:
		// The Deployment still carries the record it had.
		next.Effective = p.Status.Effective
		next.Deployed = ps.running.report()
	case ps.plan.Outcome.Runs() && ps.clusterErr == nil:
		next.Effective = apiconv.EffectiveToAPI(ps.plan.Effective)
		next.Deployed = ps.deployed.DeepCopy()
	case ps.plan.Outcome.Runs():
		// ClusterUnavailable: the parked Deployment keeps its record.
		next.Deployed = ps.running.report()
	default:
		next.Deployed = nil
	}
	prev := p.Status
	wrote, err := writeStatusIfChanged(ctx, r.Client, p, &p.Status, next)
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if !wrote {
		return nil
	}
	r.recordEvents(p, &prev, ps)
	ctrllog.FromContext(ctx).V(1).Info("status written", "ready", readyCondition(ps).reason)
	return nil
}

// nextRecord is the verified-version record, and its annotation, for what
// runs now: the running version's own, unchanged, while that version keeps
// running; a new one, stamped now, when another version starts or a legacy
// record has just verified again.
//
// ps.running may come from the cache, which may not yet hold what the pass
// before this one applied: a pass queued by an upgrade's apply can still
// find the previous version's Deployment there (readRunning reads a
// Deployment the cache does not hold from the API server itself). A
// record stamped then would differ from the one on the Deployment only in
// its verifiedAt, and applying it would change the pod template and roll
// the plugin out a second time, with a second RolledOut. So
// before stamping, unless readRunning already read it live, the Deployment
// is read from the API server (r.Reader), and a record of the operator's
// there for exactly this version (image, manifest, config) is kept, as it
// would have been had the cache been current.
func (r *PluginReconciler) nextRecord(ctx context.Context, p *v1alpha1.Plugin, ps *pass) (*v1alpha1.DeployedVersion, string, error) {
	run := ps.running
	keeps := run != nil && (ps.plan.Outcome == plugins.RolloutPrevious || sameAsDeployed(ps.current, run.rec))
	if keeps && !run.legacy {
		return run.rec, run.raw, nil
	}
	version := ps.plan.Run
	if !ps.readLive {
		live, err := r.liveRecord(ctx, p)
		if err != nil {
			return nil, "", err
		}
		if live != nil && sameAsDeployed(version, live.rec) {
			return live.rec, live.raw, nil
		}
	}
	v := ps.verification
	if ps.plan.Outcome == plugins.RolloutPrevious {
		v = ps.previousVerification
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	rec := &v1alpha1.DeployedVersion{
		Image:      version.Image.String(),
		Manifest:   apiconv.ManifestToAPI(version.Manifest),
		Signer:     v.Signer,
		Trust:      v.Reason,
		VerifiedAt: &metav1.Time{Time: now().UTC().Truncate(time.Second)},
	}
	if len(version.Config) > 0 {
		rec.Config = &apiextensionsv1.JSON{Raw: append([]byte(nil), version.Config...)}
	}
	raw, err := encodeVerifiedVersion(rec)
	if err != nil {
		return nil, "", err
	}
	return rec, raw, nil
}

// liveRecord reads the record on the plugin's Deployment from the API
// server (r.Reader), as readRunning reads it from the cache: nil when there
// is no Deployment, or no valid record of the operator's on it (a legacy or
// malformed one is nothing to keep).
func (r *PluginReconciler) liveRecord(ctx context.Context, p *v1alpha1.Plugin) (*verifiedVersion, error) {
	var d appsv1.Deployment
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(p.Name)}
	if err := r.reader().Get(ctx, key, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read Deployment %s: %w", key.Name, err)
	}
	if rec, err := readVerifiedVersion(&d, p); err == nil && rec != nil {
		return &verifiedVersion{rec: rec, raw: d.Spec.Template.Annotations[AnnotationVerifiedVersion]}, nil
	}
	return nil, nil
}

// reader is r.Reader, or r.Client without one.
func (r *PluginReconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
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
