//go:build cluster

package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestSigstoreRootChangeLive runs the operator as its ServiceAccount under
// its Role, with the binary's image checker over an in-process registry,
// starting from a TUF repository's root version 1 and a virtual Sigstore's
// trusted root, as the binary starts from the public-good ones. A plugin
// signed keyless, by an owner signer's identity, through a second virtual
// Sigstore is refused as Unsigned; the admin then copies the repository's
// files after a root rotation (root 2, signed by root keys 1 and 2) that
// publishes the second Sigstore's trusted_root.json into
// openfief-sigstore-root, and the same plugin runs, without a restart. The
// status ConfigMap names the root in use by its digest. Files of another
// repository are then refused: a Warning Event on the ConfigMap names the
// file, the status records the refusal, and the plugin keeps running under
// the root in use, its Deployment unchanged. The API server refuses none of
// the operator's requests.
func TestSigstoreRootChangeLive(t *testing.T) {
	c, cl := testCluster(t)
	rbac := renderedOperatorRBAC(t)
	rbac.install(t, cl, false)
	ctx := context.Background()

	const issuer, subject = "https://issuer.example", "https://github.com/example/plugin/.github/workflows/release.yml@refs/heads/main"
	repo := cosigntest.NewTUFRepo(t)
	first := cosigntest.NewKeyless(t, issuer, subject)
	later := cosigntest.NewKeyless(t, issuer, subject)
	start, err := cosign.NewStartTrustRoot(repo.Root(1), cosigntest.TrustedRootJSON(t, first.VS))
	if err != nil {
		t.Fatal(err)
	}

	reg := cosigntest.NewRegistry(t, false)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	ref := reg.PushImage(t, "plugins/rotated-root", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, ref, later)

	signers := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data: map[string]string{plugins.OwnerSignersKey: `{"signers":[{"name":"owner-keyless","issuer":` + mustJSON(t, issuer) +
			`,"subject":` + mustJSON(t, subject) + `}]}`},
	}
	if err := cl.Create(ctx, signers); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), signers) })

	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.startRoot = &start
	o.verifierOptions = []cosign.Option{cosign.WithSCTRequired(false)} // the virtual Sigstore issues no SCTs
	refused, stop := runOperatorWithOptions(t, c, rbac.user(), "openfief-operator-sigstore-root", o)
	f := &fixture{t: t, cluster: c, cl: cl, images: newFakeImages()}

	p := testutil.MakePlugin("rotated-root", ref.String()).Obj()
	g := testutil.GrantFor(p).Obj()
	f.create(p, g)
	t.Cleanup(func() {
		for _, o := range []client.Object{p, g} {
			_ = cl.Delete(context.Background(), o)
		}
	})
	signature := func(reason string) func(*v1alpha1.Plugin) (bool, string) {
		return func(p *v1alpha1.Plugin) (bool, string) {
			sc := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
			if sc == nil {
				return false, "no SignatureVerified"
			}
			return sc.Reason == reason, sc.Reason + ": " + sc.Message
		}
	}
	published := func(what string, ok func(plugins.TrustRootStatus) bool) plugins.TrustRootStatus {
		t.Helper()
		var got plugins.TrustRootStatus
		testutil.Eventually(t, waitTimeout, "status "+what, func() (bool, string) {
			var cm corev1.ConfigMap
			if err := cl.Get(ctx, trustRootStatusKey, &cm); err != nil {
				return false, err.Error()
			}
			s, err := plugins.ParseTrustRootStatus([]byte(cm.Data[plugins.TrustRootStatusKey]))
			if err != nil {
				return false, err.Error()
			}
			got = s
			return ok(s), cm.Data[plugins.TrustRootStatusKey]
		})
		return got
	}

	// Before the update: the signature does not verify under the start.
	f.waitPlugin(p.Name, "refused as Unsigned under the start", signature(v1alpha1.ReasonUnsigned))
	published("of the start", func(s plugins.TrustRootStatus) bool {
		return s.Source == plugins.TrustRootEmbedded && s.SHA256 == start.Status.SHA256
	})

	// The admin installs the rotated repository's files.
	repo.RotateRoot(t)
	laterRoot := cosigntest.TrustedRootJSON(t, later.VS)
	data := repo.Publish(t, laterRoot)
	rootCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: plugins.TrustRootConfigMap, Namespace: plugins.Namespace}, Data: data}
	begin := time.Now()
	if err := cl.Create(ctx, rootCM); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), rootCM) })
	f.waitPlugin(p.Name, "admitted under the rotated root", signature(v1alpha1.ReasonSignedByTrustedSigner))
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	t.Logf("the rotated root applied: the plugin admitted and applied %s after the ConfigMap was created", time.Since(begin).Round(time.Millisecond))
	inUse := published("of the rotated root", func(s plugins.TrustRootStatus) bool {
		return s.Source == plugins.TrustRootFromConfigMap && s.ConfigMap == plugins.TrustRootFingerprint(data)
	})
	if inUse.RootVersion != 2 || inUse.Refused != nil {
		t.Errorf("status = %+v, want root version 2 and no refusal", inUse)
	}
	var d appsv1.Deployment
	if !f.exists(p.Name, &d) {
		t.Fatal("no Deployment after the update")
	}

	// Files of another repository: refused, the root in use stays.
	stranger := cosigntest.NewTUFRepo(t)
	stranger.RotateRoot(t)
	bad := stranger.Publish(t, laterRoot)
	update(t, cl, rootCM, func(cm *corev1.ConfigMap) { cm.Data = bad })
	testutil.Eventually(t, waitTimeout, "a Warning Event on the ConfigMap", func() (bool, string) {
		var list eventsv1.EventList
		if err := cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == plugins.TrustRootConfigMap &&
				e.Reason == EventTrustRootInvalid && e.Type == corev1.EventTypeWarning {
				// Its 2.root.json is no newer than the root in use, so it is
				// skipped; its timestamp.json is not signed by that root's keys.
				if !strings.Contains(e.Note, plugins.TrustRootTimestampKey) {
					t.Errorf("the Event does not name the file: %s", e.Note)
				}
				return true, ""
			}
		}
		return false, "no " + EventTrustRootInvalid + " Event"
	})
	kept := published("with the refusal", func(s plugins.TrustRootStatus) bool { return s.Refused != nil })
	if kept.SHA256 != inUse.SHA256 || kept.ConfigMap != inUse.ConfigMap || kept.Refused.ConfigMap != plugins.TrustRootFingerprint(bad) {
		t.Errorf("status after the refusal = %+v, want the root in use %+v kept", kept, inUse)
	}
	f.waitPlugin(p.Name, "still admitted", signature(v1alpha1.ReasonSignedByTrustedSigner))
	var after appsv1.Deployment
	if !f.exists(p.Name, &after) || after.Generation != d.Generation {
		t.Errorf("the plugin's Deployment changed after the refusal (generation %d → %d)", d.Generation, after.Generation)
	}

	stop()
	if got := refused.List(); len(got) > 0 {
		var b strings.Builder
		for _, r := range got {
			b.WriteString("\n  " + r.String())
		}
		t.Errorf("the API server refused %d requests of the operator as %s:%s", len(got), rbac.user(), b.String())
	}
}
