//go:build cluster

package operator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// signersOf is one signers.json trusting every key under its name.
func signersOf(t *testing.T, keys map[string]*cosigntest.Key) string {
	t.Helper()
	type signer struct {
		Name      string `json:"name"`
		PublicKey string `json:"publicKey"`
	}
	var f struct {
		Signers []signer `json:"signers"`
	}
	f.Signers = []signer{}
	for _, name := range []string{"owner-a", "owner-b"} {
		if k, ok := keys[name]; ok {
			f.Signers = append(f.Signers, signer{Name: name, PublicKey: k.PublicKeyPEM(t)})
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOwnerSignersChangeLive runs the operator as its ServiceAccount under
// its Role, with the binary's image checker over an in-process registry
// and real signatures, and changes the ConfigMap openfief-trusted-signers
// under it (OF-31): two plugins signed by owner keys A and B run; removing
// B refuses B's image as UntrustedSigner and tears its workload down while
// A's Deployment keeps its pod template; adding B back runs B's again; an
// invalid signers.json admits no owner-signed image and a Warning Event on
// the ConfigMap names the field; a valid one again runs both. The operator
// is never restarted, and the API server refuses none of its requests.
func TestOwnerSignersChangeLive(t *testing.T) {
	c, cl := testCluster(t)
	rbac := renderedOperatorRBAC(t)
	rbac.install(t, cl, false)
	ctx := context.Background()

	keyA, keyB := cosigntest.NewKey(t), cosigntest.NewKey(t)
	reg := cosigntest.NewRegistry(t, false)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	refA := reg.PushImage(t, "plugins/live-a", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, refA, keyA)
	refB := reg.PushImage(t, "plugins/live-b", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, refB, keyB)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data:       map[string]string{plugins.OwnerSignersKey: signersOf(t, map[string]*cosigntest.Key{"owner-a": keyA, "owner-b": keyB})},
	}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), cm) })
	setSigners := func(data string) time.Time {
		t.Helper()
		update(t, cl, cm, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{plugins.OwnerSignersKey: data} })
		return time.Now()
	}

	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	if o.TrustedSignersFile != "" {
		t.Fatalf("the default options read a fixed signers file %q", o.TrustedSignersFile)
	}
	refused, stop := runOperatorWithOptions(t, c, rbac.user(), "openfief-operator-live-signers", o)
	f := &fixture{t: t, cluster: c, cl: cl, images: newFakeImages()}

	pa := testutil.MakePlugin("live-signer-a", refA.String()).Obj()
	pb := testutil.MakePlugin("live-signer-b", refB.String()).Obj()
	ga, gb := testutil.GrantFor(pa).Obj(), testutil.GrantFor(pb).Obj()
	f.create(pa, ga, pb, gb)
	t.Cleanup(func() {
		for _, p := range []client.Object{pa, pb, ga, gb} {
			_ = cl.Delete(context.Background(), p)
		}
	})
	f.waitReady(pa.Name, v1alpha1.ReasonProgressing)
	f.waitReady(pb.Name, v1alpha1.ReasonProgressing)
	templateA := func() (metav1.ObjectMeta, int64) {
		t.Helper()
		var d appsv1.Deployment
		if !f.exists(pa.Name, &d) {
			t.Fatal("A's Deployment is gone")
		}
		return d.Spec.Template.ObjectMeta, d.Generation
	}
	metaA, genA := templateA()

	signature := func(name, reason string) func(*v1alpha1.Plugin) (bool, string) {
		return func(p *v1alpha1.Plugin) (bool, string) {
			sc := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
			if sc == nil {
				return false, "no SignatureVerified"
			}
			return sc.Reason == reason, sc.Reason + ": " + sc.Message
		}
	}
	waitGone := func(name string) {
		t.Helper()
		testutil.Eventually(t, waitTimeout, name+"'s Deployment gone", func() (bool, string) {
			return !f.exists(name, &appsv1.Deployment{}), "the Deployment remains"
		})
	}

	// Remove B.
	start := setSigners(signersOf(t, map[string]*cosigntest.Key{"owner-a": keyA}))
	f.waitPlugin(pb.Name, "refused as UntrustedSigner", signature(pb.Name, v1alpha1.ReasonUntrustedSigner))
	waitGone(pb.Name)
	t.Logf("B removed: B's plugin refused and its Deployment gone %s after the ConfigMap changed", time.Since(start).Round(time.Millisecond))
	f.waitPlugin(pa.Name, "still signed by owner-a", signature(pa.Name, v1alpha1.ReasonSignedByTrustedSigner))
	if meta, gen := templateA(); gen != genA || !equalJSON(meta, metaA) {
		t.Errorf("A's Deployment changed (generation %d → %d): its pods would restart", genA, gen)
	}

	// Add B back.
	start = setSigners(signersOf(t, map[string]*cosigntest.Key{"owner-a": keyA, "owner-b": keyB}))
	f.waitPlugin(pb.Name, "admitted again", signature(pb.Name, v1alpha1.ReasonSignedByTrustedSigner))
	f.waitReady(pb.Name, v1alpha1.ReasonProgressing)
	t.Logf("B added back: B's plugin applied again %s after the ConfigMap changed", time.Since(start).Round(time.Millisecond))
	if f.runningImage(pb.Name) != refB.String() {
		t.Errorf("B's workload runs %q, want %s", f.runningImage(pb.Name), refB)
	}

	// An invalid signers.json: the second signer has no key.
	start = setSigners(`{"signers":[{"name":"owner-a","publicKey":` + mustJSON(t, keyA.PublicKeyPEM(t)) + `},{"name":"owner-b"}]}`)
	// B's image was read under the policy that trusts both (its re-admission
	// above), so the narrowed check finds its verified signature cached and
	// names the untrusted signer. A kept running through that change, and
	// the widening emptied the cache (trust.PolicyVerifier.Replace): when the
	// operator has not read A again since, its check reads the registry with
	// no owner key and finds no signature it can verify, so A's refusal reads
	// Unsigned. Either way A is refused; which reason depends on timing.
	f.waitPlugin(pa.Name, "refused while the signers are invalid", func(p *v1alpha1.Plugin) (bool, string) {
		untrusted, msg := signature(pa.Name, v1alpha1.ReasonUntrustedSigner)(p)
		unsigned, _ := signature(pa.Name, v1alpha1.ReasonUnsigned)(p)
		return untrusted || unsigned, msg
	})
	f.waitPlugin(pb.Name, "refused while the signers are invalid", signature(pb.Name, v1alpha1.ReasonUntrustedSigner))
	waitGone(pa.Name)
	waitGone(pb.Name)
	t.Logf("invalid signers.json: both plugins refused and torn down %s after the ConfigMap changed", time.Since(start).Round(time.Millisecond))
	testutil.Eventually(t, waitTimeout, "a Warning Event on the ConfigMap", func() (bool, string) {
		var list eventsv1.EventList
		if err := cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == plugins.OwnerSignersConfigMap &&
				e.Reason == EventTrustedSignersInvalid && e.Type == corev1.EventTypeWarning {
				if !strings.Contains(e.Note, "signers[1]") {
					t.Errorf("the Event does not name the field: %s", e.Note)
				}
				return true, ""
			}
		}
		return false, "no TrustedSignersInvalid Event"
	})

	// Valid again: both run.
	setSigners(signersOf(t, map[string]*cosigntest.Key{"owner-a": keyA, "owner-b": keyB}))
	f.waitReady(pa.Name, v1alpha1.ReasonProgressing)
	f.waitReady(pb.Name, v1alpha1.ReasonProgressing)

	// The ConfigMap deleted: no owner signer is trusted.
	start = time.Now()
	if err := cl.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	f.waitPlugin(pa.Name, "refused without the ConfigMap", signature(pa.Name, v1alpha1.ReasonUntrustedSigner))
	waitGone(pa.Name)
	t.Logf("ConfigMap deleted: A refused and torn down %s after", time.Since(start).Round(time.Millisecond))

	stop()
	if got := refused.List(); len(got) > 0 {
		var b strings.Builder
		for _, r := range got {
			b.WriteString("\n  " + r.String())
		}
		t.Errorf("the API server refused %d requests of the operator as %s:%s", len(got), rbac.user(), b.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalJSON(a, b any) bool { return mustJSONAny(a) == mustJSONAny(b) }

func mustJSONAny(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOwnerSignersInvalidAtStart starts the operator while
// openfief-trusted-signers is invalid (OF-31): it starts, trusts no owner
// signer (the owner-signed plugin does not run), records a Warning Event on
// the ConfigMap naming the field, and runs the plugin once the ConfigMap is
// made valid. Invalid is a malformed key, or the very key that signed the
// image under OpenFief's CI's name, which would
// otherwise admit the image and record its signer as openfief-ci.
func TestOwnerSignersInvalidAtStart(t *testing.T) {
	for name, tc := range map[string]struct {
		signers func(key *cosigntest.Key) string
		field   string
	}{
		"start-invalid": {signers: func(*cosigntest.Key) string { return `{"signers":[{"name":"owner","publicKey":"not a key"}]}` }, field: "signers[0].publicKey"},
		"start-ci-name": {signers: func(k *cosigntest.Key) string { return string(k.SignersJSON(t, "openfief-ci")) }, field: "signers[0].name"},
	} {
		t.Run(name, func(t *testing.T) { ownerSignersInvalidAtStart(t, name, tc.signers, tc.field) })
	}
}

func ownerSignersInvalidAtStart(t *testing.T, name string, signers func(key *cosigntest.Key) string, field string) {
	c, cl := testCluster(t)
	ctx := context.Background()
	key := cosigntest.NewKey(t)
	reg := cosigntest.NewRegistry(t, false)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	ref := reg.PushImage(t, "plugins/"+name, cosigntest.ManifestLabel(t, m))
	reg.Sign(t, ref, key)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data:       map[string]string{plugins.OwnerSignersKey: signers(key)},
	}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), cm) })

	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = nil
	startManager(t, c, 0, func(mgr ctrl.Manager) error { _, err := AddToManager(mgr, o); return err })
	f := &fixture{t: t, cluster: c, cl: cl, images: newFakeImages()}
	p := testutil.MakePlugin(name, ref.String()).Obj()
	g := testutil.GrantFor(p).Obj()
	f.create(p, g)
	t.Cleanup(func() { _ = cl.Delete(context.Background(), p); _ = cl.Delete(context.Background(), g) })

	f.waitPlugin(p.Name, "not verified", func(p *v1alpha1.Plugin) (bool, string) {
		sc := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		if sc == nil {
			return false, "no SignatureVerified"
		}
		return sc.Status == metav1.ConditionFalse && p.Status.ObservedGeneration == p.Generation, sc.Reason + ": " + sc.Message
	})
	if f.exists(p.Name, &appsv1.Deployment{}) {
		t.Error("the owner-signed plugin runs while the signers are invalid")
	}
	testutil.Eventually(t, waitTimeout, "a Warning Event on the ConfigMap", func() (bool, string) {
		var list eventsv1.EventList
		if err := cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == plugins.OwnerSignersConfigMap && e.Reason == EventTrustedSignersInvalid &&
				e.Regarding.UID == cm.UID && strings.Contains(e.Note, field) {
				return true, ""
			}
		}
		return false, "no TrustedSignersInvalid Event naming " + field
	})

	update(t, cl, cm, func(cm *corev1.ConfigMap) {
		cm.Data = map[string]string{plugins.OwnerSignersKey: string(key.SignersJSON(t, "owner"))}
	})
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
}
