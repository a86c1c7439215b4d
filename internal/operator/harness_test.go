//go:build cluster

package operator

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/operator/operatortest"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
)

// The reconciler tests run against a real kube-apiserver and etcd (the
// package's shared minimal control plane), with the CRDs from deploy/crds.
// Minimal mode has no Deployment controller, so Ready stops at Progressing
// there; the end-to-end suite covers Running on the full control plane.

// testCluster returns the package's control plane, with the openfief
// namespace and the core's and proxy's Services in place.
func testCluster(t testing.TB) (*devcluster.Cluster, client.Client) {
	t.Helper()
	c := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{testutil.CRDDir()}})
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// The tests' own client is not rate-limited like client-go's default
	// (5 QPS), so setting up many objects does not dominate a benchmark.
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plugins.Namespace}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ensureService(t, cl, DefaultCoreService, DefaultCorePort, 9090, map[string]string{"app": "openfief-core"})
	ensureService(t, cl, DefaultProxyService, DefaultProxyPort, 3128, map[string]string{"app": "openfief-egress-proxy"})
	return c, cl
}

func ensureService(t testing.TB, cl client.Client, name, port string, podPort int32, sel map[string]string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
		Spec: corev1.ServiceSpec{
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: port, Port: 80, TargetPort: intstr.FromInt32(podPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := cl.Create(context.Background(), svc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// fakeImages stands in for PolicyVerifier: the registry and signature path is
// tested in internal/trust/cosign and verify_test.go; here each digest's
// outcome is set by the test. Unknown digests are unsigned.
type fakeImages struct {
	mu       sync.Mutex
	outcomes map[string]trust.Verification
	down     bool // every check answers RegistryUnavailable
}

func newFakeImages() *fakeImages { return &fakeImages{outcomes: map[string]trust.Verification{}} }

func (f *fakeImages) sign(image string) {
	ref, err := plugins.ParseImageRef(image)
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes[ref.Digest()] = trust.Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Message: "signed by test", Signer: "test-owner"}
}

func (f *fakeImages) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeImages) Check(_ context.Context, ref plugins.ImageRef, _ *plugins.Manifest) trust.Verification {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return trust.Verification{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRegistryUnavailable, Message: "registry down (test)"}
	}
	if v, ok := f.outcomes[ref.Digest()]; ok {
		return v
	}
	return trust.Verification{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnsigned, Message: "no signature (test)"}
}

// writeCounter counts the write requests a manager sends.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		w.writes.Add(1)
	}
	return w.next.RoundTrip(r)
}

// operatorRun is one running operator manager.
type operatorRun struct {
	writes *writeCounter
	stop   func()
}

// startOperator runs the operator's reconcilers in a manager of their own
// against the test cluster until the returned run is stopped (or the test ends).
func startOperator(t testing.TB, c *devcluster.Cluster, images trust.ImageChecker) *operatorRun {
	t.Helper()
	return startOperatorQPS(t, c, images, 0)
}

// startOperatorQPS is startOperator with the client's rate limit set to qps
// (0 keeps controller-runtime's default). The controllers are built as the
// binary builds them (AddToManager), with images in place of the registry.
func startOperatorQPS(t testing.TB, c *devcluster.Cluster, images trust.ImageChecker, qps float32) *operatorRun {
	t.Helper()
	return startOperatorWith(t, c, images, qps, func(*Options) {})
}

// startOperatorWith is startOperatorQPS with the Options edited by set
// first.
func startOperatorWith(t testing.TB, c *devcluster.Cluster, images trust.ImageChecker, qps float32, set func(*Options)) *operatorRun {
	t.Helper()
	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = images
	set(&o)
	return startManager(t, c, qps, func(mgr ctrl.Manager) error {
		_, err := AddToManager(mgr, o)
		return err
	})
}

// startManager runs a manager with Options{}.ManagerOptions (nothing
// served, no leader election) against the test cluster, with what setup adds
// to it, until the returned run is stopped or the test ends, counting the
// writes it sends. qps is the client's rate limit (0 keeps
// controller-runtime's default).
func startManager(t testing.TB, c *devcluster.Cluster, qps float32, setup func(ctrl.Manager) error) *operatorRun {
	t.Helper()
	counter := &writeCounter{}
	run := operatortest.Start(t, c.Config, operatortest.Options{
		Manager: Options{}.ManagerOptions, Setup: setup, QPS: qps, Burst: int(2 * qps),
		Transport: func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter },
	})
	return &operatorRun{writes: counter, stop: run.Stop}
}

// assertHardenedPod checks the pod meets the restricted Pod Security Standard
// and runs the expected image with one replica and the Recreate strategy.
func assertHardenedPod(t *testing.T, d *appsv1.Deployment, image string) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d strategy %s", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("pod mounts an API token or has service links")
	}
	ctr := spec.Containers[0]
	sc := ctr.SecurityContext
	if ctr.Image != image || sc == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container %s not hardened: %s", ctr.Image, describeJSON(sc))
	}
	if d.Spec.Template.Annotations[AnnotationConfigHash] == "" {
		t.Error("no config hash annotation")
	}
	// The isolation gate runs first, as hardened, with nothing mounted
	// (OF-42).
	if len(spec.InitContainers) != 1 {
		t.Fatalf("init containers %s, want the isolation gate", describeJSON(spec.InitContainers))
	}
	gate := spec.InitContainers[0]
	gsc := gate.SecurityContext
	if gate.Name != plugins.GateContainerName || gate.Image != testutil.GateImage || len(gate.VolumeMounts) != 0 ||
		gsc == nil || !*gsc.RunAsNonRoot || !*gsc.ReadOnlyRootFilesystem || *gsc.AllowPrivilegeEscalation ||
		!slices.Equal(gsc.Capabilities.Drop, []corev1.Capability{"ALL"}) || gsc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("isolation gate not as built: %s", describeJSON(gate))
	}
}

// tokenAudiences lists the projected token audiences of a Deployment's pod.
func tokenAudiences(d *appsv1.Deployment) []string {
	var out []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					out = append(out, s.ServiceAccountToken.Audience)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func assertTokens(t *testing.T, d *appsv1.Deployment, want []string) {
	t.Helper()
	if got := tokenAudiences(d); !slices.Equal(got, want) {
		t.Errorf("token audiences %v, want %v", got, want)
	}
}

func assertNoDNS(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			if p.Port == nil || p.Port.IntValue() == 53 {
				t.Errorf("egress rule allows DNS or any port: %s", describeJSON(r))
			}
		}
		if len(r.Ports) == 0 || len(r.To) == 0 {
			t.Errorf("egress rule without ports or peers: %s", describeJSON(r))
		}
	}
}
