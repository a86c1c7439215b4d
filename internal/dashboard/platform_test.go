//go:build cluster

package dashboard_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/operator/operatortest"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// platform is the real thing the dashboard shows: the full local control
// plane (Deployments become available through kwok), the CRDs, the real
// operator, and an in-process registry of images with real signatures. The
// operator trusts a catalog that pins one digest to a publisher's key, and
// the owner's key; the owner's key is also in the cluster's
// openfief-trusted-signers ConfigMap, as an install has it.
type platform struct {
	cluster   *devcluster.Cluster
	c         client.Client
	reg       *cosigntest.Registry
	owner     *cosigntest.Key
	publisher *cosigntest.Key
	catalog   plugins.Catalog
}

// Names of the signers the platform trusts.
const (
	publisherName = "acme-publisher"
	ownerName     = "household-owner"
)

// newPlatform starts the package's shared full control plane and a fresh
// registry. The catalog pins the digest of verifiedManifest's image; call
// startOperator once every image is pushed.
func newPlatform(t *testing.T, verifiedManifest plugins.Manifest) (*platform, plugins.ImageRef) {
	t.Helper()
	p := &platform{
		cluster:   devcluster.Shared(t, devcluster.Options{Mode: devcluster.Full, CRDDirectoryPaths: []string{testutil.CRDDir()}}),
		reg:       cosigntest.NewRegistry(t, true),
		owner:     cosigntest.NewKey(t),
		publisher: cosigntest.NewKey(t),
	}
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if p.c, err = client.New(p.cluster.Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	p.installNamespace(t)

	verified := p.reg.PushImage(t, "plugins/fx-verified", cosigntest.ManifestLabel(t, verifiedManifest))
	p.reg.Sign(t, verified, p.publisher)
	raw, err := json.Marshal(map[string]any{"plugins": []any{map[string]any{
		"name": "fx-verified", "image": verified.String(),
		"publisher": map[string]string{"name": publisherName, "publicKey": p.publisher.PublicKeyPEM(t)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.catalog, err = plugins.ParseCatalog(raw); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data:       map[string]string{plugins.OwnerSignersKey: string(p.owner.SignersJSON(t, ownerName))},
	}
	if err := p.c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return p, verified
}

// installNamespace creates the openfief namespace (restricted Pod Security,
// from deploy/crds) and the core's and proxy's Services the operator needs.
func (p *platform) installNamespace(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var ns corev1.Namespace
	if err := yaml.UnmarshalStrict(deploy.Namespace(), &ns); err != nil {
		t.Fatal(err)
	}
	if err := p.c.Create(ctx, &ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, svc := range []struct {
		name, port string
		podPort    int32
	}{{operator.DefaultCoreService, operator.DefaultCorePort, 8080}, {operator.DefaultProxyService, operator.DefaultProxyPort, 3128}} {
		obj := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc.name, Namespace: plugins.Namespace},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app.kubernetes.io/name": svc.name},
				Ports:    []corev1.ServicePort{{Name: svc.port, Port: svc.podPort, TargetPort: intstr.FromInt32(svc.podPort), Protocol: corev1.ProtocolTCP}},
			},
		}
		if err := p.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// signed pushes an image labelled with m, signed by the owner's key.
func (p *platform) signed(t *testing.T, repo string, m plugins.Manifest) plugins.ImageRef {
	t.Helper()
	ref := p.reg.PushImage(t, repo, cosigntest.ManifestLabel(t, m))
	p.reg.Sign(t, ref, p.owner)
	return ref
}

// startOperator runs the real operator, built as the binary builds it
// (AddToManager), with a PolicyVerifier over the registry that trusts
// OpenFief's CI, the test catalog's publisher and the owner's key.
func (p *platform) startOperator(t *testing.T) {
	t.Helper()
	signers, err := plugins.ParseOwnerSigners(p.owner.SignersJSON(t, ownerName))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := plugins.NewTrustPolicy(p.catalog, signers)
	if err != nil {
		t.Fatal(err)
	}
	images, err := trust.NewImageVerifier(policy)
	if err != nil {
		t.Fatal(err)
	}
	o := operator.DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = trust.NewPolicyVerifier(images, policy)
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.LeaderElection = "0", "", false
	operatortest.Start(t, p.cluster.Config, operatortest.Options{
		Manager: o.ManagerOptions,
		Setup:   func(mgr ctrl.Manager) error { _, err := operator.AddToManager(mgr, o); return err },
	})
}

// install creates the Plugin as a vendor's install writes it: the image and
// a copy of its signed manifest.
func (p *platform) install(t *testing.T, name string, ref plugins.ImageRef, m plugins.Manifest) {
	t.Helper()
	pl := &v1alpha1.Plugin{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
		Spec:       v1alpha1.PluginSpec{Image: ref.String(), Manifest: apiconv.ManifestToAPI(m)},
	}
	if err := p.c.Create(context.Background(), pl); err != nil {
		t.Fatal(err)
	}
}

// upgrade changes the Plugin's image and manifest, as `openfief plugin
// upgrade` does.
func (p *platform) upgrade(t *testing.T, name string, ref plugins.ImageRef, m plugins.Manifest) {
	t.Helper()
	var pl v1alpha1.Plugin
	if err := p.c.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &pl); err != nil {
		t.Fatal(err)
	}
	pl.Spec.Image, pl.Spec.Manifest = ref.String(), apiconv.ManifestToAPI(m)
	if err := p.c.Update(context.Background(), &pl); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until the operator reports reason as the plugin's Ready
// reason for its current generation.
func (p *platform) waitReady(t *testing.T, name, reason string) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, name+" Ready="+reason, func() (bool, string) {
		var pl v1alpha1.Plugin
		if err := p.c.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &pl); err != nil {
			return false, err.Error()
		}
		for _, c := range pl.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady && pl.Status.ObservedGeneration == pl.Generation {
				return c.Reason == reason, c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition for the current generation"
	})
}

// grantExists reports whether the PluginGrant name exists.
func (p *platform) grantExists(t *testing.T, name string) bool {
	t.Helper()
	err := p.c.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &v1alpha1.PluginGrant{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}
