//go:build cluster

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestInstallManifests installs the platform as a cluster admin would
// (docs/operator.md, Install), on the suite's cluster: the operator,
// egress-proxy and openfief-core images are built from this tree for this
// machine's platform (or reused from .cache/e2e-images), pushed to the
// platform's registry, and deploy/operator, deploy/egress-proxy and
// deploy/core pinned to their digests by a release overlay
// (overlay.WriteRelease); deploy/crds and the overlay, rendered with
// the kustomize API, are server-side applied. The openfief namespace
// enforces the restricted Pod Security level, the API server warns of
// nothing, and the three Deployments become Available running the pinned
// images: their pods were admitted under that level (kwok plays them, so no
// container runs, and the operator, proxy and core of the suite, in this
// process, are not disturbed).
//
// deploy/admission is not applied: its policy lets only the ReplicaSet
// controller's identities create plugin pods, and the suite's
// controller manager acts as the cluster admin (as internal/devcluster runs
// it), so every plugin pod of the suite would be refused; deploy/admission's
// own tests run the controllers as real clusters do.
func TestInstallManifests(t *testing.T) {
	ctx := context.Background()
	root, err := images.FindRoot(repoRoot(t))
	must(t, err)

	start := time.Now()
	src, err := images.ReadSource(ctx, root)
	must(t, err)
	specs, err := images.SelectSpecs("operator", "egress-proxy", "openfief-core")
	must(t, err)
	built, reused, err := images.Cached(ctx, filepath.Join(root, ".cache", "e2e-images"), images.Options{
		Source: src, Specs: specs, Platforms: []v1.Platform{images.HostPlatform()},
	})
	must(t, err)
	refs := map[string]plugins.ImageRef{}
	for _, b := range built.Images {
		ref, err := images.PushIndex(ctx, images.Repository(stack.RegistryHost, b.Spec.Name), b.Index, images.PushOptions{})
		must(t, err)
		refs[b.Spec.Name] = ref
	}
	how := "built"
	if reused {
		how = "reused"
	}
	t.Logf("%s and pushed the operator, egress-proxy and openfief-core images of %s in %s: %s, %s, %s", how, src.Version,
		time.Since(start).Round(100*time.Millisecond), refs["operator"], refs["egress-proxy"], refs["openfief-core"])

	dir := t.TempDir()
	must(t, overlay.WriteRelease(dir, filepath.Join(root, "deploy"), refs, "The end-to-end suite's install: deploy/ pinned to this tree's images."))
	objs := append(renderKustomization(t, filepath.Join(root, "deploy", "crds")), renderKustomization(t, dir)...)

	warnings := &warningLog{}
	cfg := rest.CopyConfig(stack.Cluster.Config)
	cfg.WarningHandlerWithContext = warnings
	s, err := apiconv.NewScheme()
	must(t, err)
	admin, err := client.New(cfg, client.Options{Scheme: s})
	must(t, err)
	// The local cluster has no storage provisioner: the admin provides the
	// volume deploy/core's claim binds to, as on a cluster without one.
	must(t, admin.Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-openfief-core-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/e2e-openfief-core"}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: plugins.Namespace, Name: "openfief-core-data"},
		},
	}))
	for _, u := range objs {
		err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership)
		if err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if w := warnings.list(); len(w) > 0 {
		t.Errorf("the API server warned while applying deploy/: %s", strings.Join(w, "; "))
	}

	// The namespace enforces the restricted level...
	var ns corev1.Namespace
	must(t, admin.Get(ctx, client.ObjectKey{Name: plugins.Namespace}, &ns))
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Fatalf("namespace %s enforces Pod Security level %q, want restricted", ns.Name, got)
	}
	// ...and the API server holds pods to it.
	loose := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-security-probe", Namespace: plugins.Namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: refs["operator"].String()}}},
	}
	if err := admin.Create(ctx, loose, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Fatalf("a pod that is not hardened: %v, want refused by PodSecurity", err)
	}

	for name, image := range map[string]string{
		"openfief-operator":     refs["operator"].String(),
		"openfief-egress-proxy": refs["egress-proxy"].String(),
		"openfief-core":         refs["openfief-core"].String(),
	} {
		var d appsv1.Deployment
		testutil.Eventually(t, waitTimeout, name+" Available", func() (bool, string) {
			if err := admin.Get(ctx, clientKey(name), &d); err != nil {
				return false, err.Error()
			}
			return platform.DeploymentAvailable(&d), describeDeployment(ctx, admin, &d)
		})
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("%s runs %s, want the pinned %s", name, got, image)
		}
		var pods corev1.PodList
		must(t, admin.List(ctx, &pods, client.InNamespace(plugins.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) && p.Spec.Containers[0].Image == image && p.Spec.ServiceAccountName == name {
				ready++
			}
		}
		if want := int(*d.Spec.Replicas); ready != want {
			t.Errorf("%s: %d Ready pods of %s as %s, want %d", name, ready, image, name, want)
		}
		t.Logf("%s: Available, %d pods Ready running %s", name, ready, image)
	}
}

// renderKustomization builds the kustomization in dir with the kustomize API,
// as `kubectl apply -k` would.
func renderKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := deploy.Render(dir)
	must(t, err)
	return objs
}

// describeDeployment says where a Deployment stands, with the failures of
// its ReplicaSets (a pod refused by Pod Security shows there).
func describeDeployment(ctx context.Context, c client.Client, d *appsv1.Deployment) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("available %d/%d", d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 0)))
	for _, cond := range d.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s", cond.Type, cond.Status, cond.Message))
	}
	var rs appsv1.ReplicaSetList
	if err := c.List(ctx, &rs, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err == nil {
		for _, r := range rs.Items {
			for _, cond := range r.Status.Conditions {
				parts = append(parts, fmt.Sprintf("ReplicaSet %s %s: %s", r.Name, cond.Type, cond.Message))
			}
		}
	}
	return strings.Join(parts, "; ")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// warningLog collects the API server's warnings to a client.
type warningLog struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningLog) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningLog) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}
