//go:build cluster

package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// staleDeployments is the Plugin reconciler's client, and its owned cache
// (metadataReader), with that cache lagging one pass behind the plugins'
// Deployments, as a cache can: once armed for a plugin, the pass that
// applies its Deployment and the whole pass after it read the
// Deployment's metadata as the cache held it before that apply (NotFound
// for a first install). The pass after
// an apply always comes, queued by the apply's own events, so the stale
// read is certain, not a matter of timing. It also tells which passes read
// which Plugin: each pass starts with one read of its Plugin.
type staleDeployments struct {
	client.Client
	// metadata is the owned cache the stale reads stand in front of.
	metadata client.Reader

	mu        sync.Mutex
	passes    map[string]int                           // plugin → passes started
	touched   map[string]string                        // plugin → its label touchLabel as its last pass read it
	armed     map[string]int                           // plugin → passes to hide its next Deployment apply for
	applyPass map[string]int                           // plugin → the pass of that apply
	hideUntil map[string]int                           // plugin → last pass that reads the old Deployment
	old       map[string]*metav1.PartialObjectMetadata // plugin → the Deployment before the apply, nil for none
	seen      map[string]*metav1.PartialObjectMetadata // plugin → the Deployment its last cache read returned
	stale     map[string]int                           // plugin → stale reads in the pass after an apply
}

// touchLabel is the label touch sets on a Plugin.
const touchLabel = "openfief.test/touch"

func newStaleDeployments(c client.Client, metadata client.Reader) *staleDeployments {
	return &staleDeployments{
		Client: c, metadata: metadata, passes: map[string]int{}, touched: map[string]string{}, armed: map[string]int{}, applyPass: map[string]int{},
		hideUntil: map[string]int{}, old: map[string]*metav1.PartialObjectMetadata{}, seen: map[string]*metav1.PartialObjectMetadata{},
		stale: map[string]int{},
	}
}

// arm makes the pass after the next apply of each plugin's Deployment read
// it stale, and starts counting that pass's stale reads.
func (s *staleDeployments) arm(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.armed[n], s.stale[n] = 1, 0
	}
}

// hold makes every pass after the next apply of the plugin's Deployment
// read it stale, until release.
func (s *staleDeployments) hold(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed[name], s.stale[name] = math.MaxInt32, 0
}

// release ends a hold: the passes from the next on read the cache as it is.
func (s *staleDeployments) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hideUntil[name] = s.passes[name]
}

// Get counts the passes: each starts with one read of its Plugin.
func (s *staleDeployments) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := s.Client.Get(ctx, key, obj, opts...)
	if o, ok := obj.(*v1alpha1.Plugin); ok {
		s.mu.Lock()
		s.passes[key.Name]++
		if err == nil {
			s.touched[key.Name] = o.Labels[touchLabel]
		}
		s.mu.Unlock()
	}
	return err
}

// metadataReader is the owned cache as the reconciler reads it, the
// Deployments' metadata stale as armed.
func (s *staleDeployments) metadataReader() client.Reader { return staleMetadata{s} }

type staleMetadata struct{ s *staleDeployments }

func (m staleMetadata) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return m.s.metadata.List(ctx, list, opts...)
}

func (m staleMetadata) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s := m.s
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || o.GroupVersionKind().Kind != "Deployment" {
		return s.metadata.Get(ctx, key, obj, opts...)
	}
	name := strings.TrimPrefix(key.Name, "plugin-")
	s.mu.Lock()
	pass, until := s.passes[name], s.hideUntil[name]
	if pass <= until {
		if pass > s.applyPass[name] {
			s.stale[name]++
		}
		old := s.old[name]
		s.mu.Unlock()
		if old == nil {
			return apierrors.NewNotFound(appsv1.Resource("deployments"), key.Name)
		}
		old.DeepCopyInto(o)
		return nil
	}
	s.mu.Unlock()
	err := s.metadata.Get(ctx, key, obj, opts...)
	s.mu.Lock()
	if err == nil {
		s.seen[name] = o.DeepCopy()
	} else if apierrors.IsNotFound(err) {
		s.seen[name] = nil
	}
	s.mu.Unlock()
	return err
}

func (s *staleDeployments) Apply(ctx context.Context, ac runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if raw, err := json.Marshal(ac); err == nil && json.Unmarshal(raw, &head) == nil && head.Kind == "Deployment" {
		name := strings.TrimPrefix(head.Metadata.Name, "plugin-")
		s.mu.Lock()
		if k := s.armed[name]; k > 0 {
			s.armed[name] = 0
			s.old[name] = s.seen[name]
			s.applyPass[name] = s.passes[name]
			s.hideUntil[name] = s.passes[name] + k
		}
		s.mu.Unlock()
	}
	return s.Client.Apply(ctx, ac, opts...)
}

// staleReads reports how many Deployment reads of the pass after the armed
// apply were stale.
func (s *staleDeployments) staleReads(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale[name]
}

// lastTouch is touchLabel as the plugin's last pass read it.
func (s *staleDeployments) lastTouch(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touched[name]
}

// eventLog keeps the Events the reconciler records, per Plugin, as "Type
// Reason", and passes every Event on. It sees each call, where the API
// would show a repeat within client-go's window as one Event of a series.
type eventLog struct {
	next events.EventRecorder

	mu     sync.Mutex
	events map[string][]string
}

func (r *eventLog) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if p, ok := regarding.(*v1alpha1.Plugin); ok {
		r.mu.Lock()
		r.events[p.Name] = append(r.events[p.Name], eventtype+" "+reason)
		r.mu.Unlock()
	}
	r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// of lists the plugin's Events, oldest first.
func (r *eventLog) of(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[name])
}

// rolledOut counts the plugin's RolledOut Events.
func (r *eventLog) rolledOut(name string) int {
	n := 0
	for _, e := range r.of(name) {
		if e == corev1.EventTypeNormal+" "+EventRolledOut {
			n++
		}
	}
	return n
}

// startStaleOperator starts the operator against the package's control
// plane with its Deployment reads through a staleDeployments, its Events
// logged, and every record it stamps a second later than the one before, so
// a version stamped twice gets two records for certain.
func startStaleOperator(t *testing.T) (*fixture, *staleDeployments, *eventLog) {
	t.Helper()
	c, cl := testCluster(t)
	images := newFakeImages()
	var stale *staleDeployments
	log := &eventLog{events: map[string][]string{}}
	var tick atomic.Int64
	base := time.Now()
	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = images
	run := startManager(t, c, 100, func(mgr ctrl.Manager) error {
		r, err := AddToManager(mgr, o)
		if err != nil {
			return err
		}
		stale = newStaleDeployments(r.Plugins.Client, r.Plugins.owned.cache)
		r.Plugins.Client = stale
		r.Plugins.owned.cache = stale.metadataReader()
		log.next = r.Plugins.Recorder
		r.Plugins.Recorder = log
		r.Plugins.Now = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }
		return nil
	})
	return &fixture{t: t, cluster: c, cl: cl, images: images, operator: run}, stale, log
}

// createAwaitingApproval creates p with a grant of everything but its
// egress hosts and waits until it awaits approval.
func (f *fixture) createAwaitingApproval(p *v1alpha1.Plugin) {
	f.t.Helper()
	f.images.sign(p.Spec.Image)
	f.create(testutil.MakeGrant(p.Name).Capabilities(p.Spec.Manifest.Capabilities...).Obj(), p)
}

// approveEgress approves the plugin's egress hosts.
func (f *fixture) approveEgress(name string, hosts ...v1alpha1.EgressHost) {
	f.t.Helper()
	update(f.t, f.cl, testutil.MakeGrant(name).Obj(), func(g *v1alpha1.PluginGrant) { g.Spec.Egress = hosts })
}

// TestApprovalRollsOutOnce approves 20 plugins at once and checks that each
// rolls out exactly once: its Deployment's pod template is applied once
// (metadata.generation stays 1; the package's control plane has no
// Deployment controller, so there are no ReplicaSets to count, but each
// template change would be one) and it records one RolledOut. The cache
// lags one pass behind every first apply (staleDeployments), and every
// record the operator stamps is a second later than the one before, so a
// pass that stamped the record again would change the template for certain
// (the pod of the first ReplicaSet would be replaced seconds after
// approval). Five of them are then upgraded, the cache again one pass
// behind: one more rollout each, not two.
func TestApprovalRollsOutOnce(t *testing.T) {
	const n, upgraded = 20, 5
	f, stale, log := startStaleOperator(t)
	names := make([]string, n)
	ps := make([]*v1alpha1.Plugin, n)
	for i := range n {
		names[i] = fmt.Sprintf("once-%02d", i)
		ps[i] = testutil.MakePlugin(names[i], testutil.Image(names[i]+"-1")).Egress("api.nbp.pl").Obj()
	}
	stale.arm(names...)
	for _, p := range ps {
		f.createAwaitingApproval(p)
	}
	for _, name := range names {
		f.waitReady(name, v1alpha1.ReasonAwaitingApproval)
	}

	// The owner approves every host at once.
	for _, name := range names {
		f.approveEgress(name, "api.nbp.pl")
	}
	settleRollouts(f, stale, names)
	for _, name := range names {
		assertRolledOut(f, log, name, 1, 1)
	}

	// Upgrades of five of them need no approval (the same manifest): one
	// more rollout each, with the cache again a pass behind.
	stale.arm(names[:upgraded]...)
	for i, name := range names[:upgraded] {
		image := testutil.Image(name + "-2")
		f.images.sign(image)
		update(t, f.cl, ps[i].DeepCopy(), func(p *v1alpha1.Plugin) { p.Spec.Image = image })
	}
	settleRollouts(f, stale, names[:upgraded])
	for i, name := range names {
		want := int64(1)
		if i < upgraded {
			want = 2
		}
		assertRolledOut(f, log, name, want, int(want))
	}
}

// TestUpgradeBeforeCacheSeesRolloutKeepsIt upgrades a plugin, to a version
// that needs approval, while the cache has not yet seen the Deployment its
// approval just created (TestEventsTellThePluginsStory hit this
// by timing). The first version keeps running and nothing else is told: no
// Stopped and no second RolledOut for a version that never stopped, and its
// pod template is applied once.
func TestUpgradeBeforeCacheSeesRolloutKeepsIt(t *testing.T) {
	f, stale, log := startStaleOperator(t)
	p := testutil.MakePlugin("held", testutil.Image("held-1")).Egress("api.nbp.pl").Obj()
	f.createAwaitingApproval(p)
	f.waitReady(p.Name, v1alpha1.ReasonAwaitingApproval)
	stale.hold(p.Name)
	f.approveEgress(p.Name, "api.nbp.pl")
	f.waitPlugin(p.Name, "rolled out", func(p *v1alpha1.Plugin) (bool, string) {
		return p.Status.Deployed != nil, describeJSON(p.Status)
	})

	v2 := testutil.Image("held-2")
	f.images.sign(v2)
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2
		p.Spec.Manifest.Egress = append(p.Spec.Manifest.Egress, "static.nbp.pl")
	})
	f.waitPlugin(p.Name, "the upgrade seen while the cache has no Deployment", func(p *v1alpha1.Plugin) (bool, string) {
		reads := stale.staleReads(p.Name)
		return p.Status.ObservedGeneration == p.Generation && p.Generation == 2 && reads > 0,
			fmt.Sprintf("observed generation %d of %d, %d stale reads", p.Status.ObservedGeneration, p.Generation, reads)
	})
	stale.release(p.Name)
	settleRollouts(f, stale, []string{p.Name})
	want := []string{"Normal ImageVerified", "Normal NotRunning", "Normal RolledOut", "Normal ImageVerified", "Normal KeptPreviousVersion"}
	if diff := cmp.Diff(want, log.of(p.Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var d appsv1.Deployment
	if !f.exists(p.Name, &d) || d.Generation != 1 || runningImage(&d) != p.Spec.Image {
		t.Errorf("Deployment generation %d running %s, want generation 1 running %s", d.Generation, runningImage(&d), p.Spec.Image)
	}
}

// settleRollouts waits until each plugin's rollout is applied and the stale pass
// after it has run, then until every pass queued before has ended: a pass
// that read a touch (a label set on the Plugin) started after every earlier
// pass of that Plugin ended, as the controller never runs two of one
// Plugin at once; touched twice, the pass that read the first touch has
// ended too.
func settleRollouts(f *fixture, stale *staleDeployments, names []string) {
	f.t.Helper()
	for _, name := range names {
		f.waitPlugin(name, "rolled out, and a pass read its Deployment stale", func(p *v1alpha1.Plugin) (bool, string) {
			reads := stale.staleReads(name)
			ok := p.Status.ObservedGeneration == p.Generation && p.Status.Deployed != nil && reads > 0
			return ok, fmt.Sprintf("deployed %s, %d stale reads", describeJSON(p.Status.Deployed), reads)
		})
	}
	for round := range 2 {
		value := fmt.Sprintf("%d-%d", time.Now().UnixNano(), round)
		for _, name := range names {
			label(f.t, f.cl, &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: name}}, touchLabel, value)
		}
		for _, name := range names {
			testutil.Eventually(f.t, waitTimeout, name+" read touch "+value, func() (bool, string) {
				got := stale.lastTouch(name)
				return got == value, got
			})
		}
	}
}

// assertRolledOut checks that the plugin's Deployment template changed
// generation times in all (generation; the operator never changes its
// replicas while it runs), that it carries the record status.deployed
// reports, and that rolledOut RolledOut Events were recorded.
func assertRolledOut(f *fixture, log *eventLog, name string, generation int64, rolledOut int) {
	f.t.Helper()
	var p v1alpha1.Plugin
	if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
		f.t.Fatal(err)
	}
	var d appsv1.Deployment
	if !f.exists(name, &d) {
		f.t.Fatalf("%s: no Deployment", name)
	}
	rec, err := decodeVerifiedVersion(d.Spec.Template.Annotations[AnnotationVerifiedVersion])
	if err != nil {
		f.t.Fatalf("%s: %v", name, err)
	}
	if d.Generation != generation {
		f.t.Errorf("%s: Deployment generation %d, want %d: its pod template changed %d times (record now %s)",
			name, d.Generation, generation, d.Generation, describeJSON(rec))
	}
	if p.Status.Deployed == nil || !p.Status.Deployed.VerifiedAt.Equal(rec.VerifiedAt) || p.Status.Deployed.Image != rec.Image {
		f.t.Errorf("%s: status.deployed %s, the Deployment's record %s", name, describeJSON(p.Status.Deployed), describeJSON(rec))
	}
	if got := log.rolledOut(name); got != rolledOut {
		f.t.Errorf("%s: %d RolledOut Events, want %d: %v", name, got, rolledOut, log.of(name))
	}
}
