//go:build cluster

package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

func TestNoGrantRunsNothing(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("nogrant", testutil.Image("nogrant-1")).Egress("api.nbp.pl").Obj()
	f.images.sign(p.Spec.Image)
	f.create(p)

	got := f.waitReady(p.Name, v1alpha1.ReasonNoGrant)
	f.waitTornDown(p.Name)
	ar := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired)
	if ar == nil || ar.Status != metav1.ConditionTrue || ar.Reason != v1alpha1.ReasonPermissionsPending {
		t.Errorf("ApprovalRequired = %+v, want True/PermissionsPending", ar)
	}
	want := &v1alpha1.PendingApproval{Capabilities: []v1alpha1.Capability{"connector"}, Egress: []string{"api.nbp.pl:443"}}
	if got.Status.PendingApproval == nil || !slices.Equal(got.Status.PendingApproval.Egress, want.Egress) ||
		!slices.Equal(got.Status.PendingApproval.Capabilities, want.Capabilities) {
		t.Errorf("pendingApproval = %+v, want %+v", got.Status.PendingApproval, want)
	}
	if got.Status.Deployed != nil || got.Status.Effective != nil {
		t.Errorf("deployed %+v effective %+v, want none", got.Status.Deployed, got.Status.Effective)
	}
}

func TestGrantRunsAndRevocationIsImmediate(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("revoke", testutil.Image("revoke-1")).Egress("api.nbp.pl").Secret("nbp-token", "/etc/nbp").Obj()
	got := f.run(p)

	var dep appsv1.Deployment
	if !f.exists(p.Name, &dep) {
		t.Fatal("no Deployment")
	}
	assertHardenedPod(t, &dep, p.Spec.Image)
	assertTokens(t, &dep, []string{plugins.AudienceCore, plugins.AudienceEgress})
	// Opening hosts lands with the allow-list writer's next batch (OF-15).
	testutil.Eventually(t, waitTimeout, "allow-list api.nbp.pl:443", func() (bool, string) {
		v, ok := f.allowList(p.Name)
		return ok && v == "api.nbp.pl:443\n", fmt.Sprintf("allow-list = %q (present %v)", v, ok)
	})
	if got.Status.Deployed == nil || got.Status.Deployed.Image != p.Spec.Image || got.Status.Deployed.VerifiedAt == nil {
		t.Errorf("deployed = %+v", got.Status.Deployed)
	}
	var np networkingv1.NetworkPolicy
	f.exists(p.Name, &np)
	assertNoDNS(t, &np)
	if len(np.Spec.Egress) != 2 || len(np.Spec.Ingress) != 1 {
		t.Errorf("NetworkPolicy rules: %d ingress, %d egress; want 1 and 2", len(np.Spec.Ingress), len(np.Spec.Egress))
	}

	f.delete(testutil.MakeGrant(p.Name).Obj())
	f.waitReady(p.Name, v1alpha1.ReasonNoGrant)
	f.waitTornDown(p.Name)
}

func TestUpgradeRequestingNewHostKeepsPreviousVersion(t *testing.T) {
	f := newFixture(t)
	v1 := testutil.MakePlugin("upgrade", testutil.Image("upgrade-1")).Egress("api.nbp.pl").Obj()
	f.run(v1)
	grant := testutil.MakeGrant(v1.Name).Obj()

	// The vendor's new version asks for one more host.
	v2image := testutil.Image("upgrade-2")
	f.images.sign(v2image)
	update(t, f.cl, v1.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2image
		p.Spec.Manifest.Egress = append(p.Spec.Manifest.Egress, "static.nbp.pl")
	})
	got := f.waitPlugin(v1.Name, "pending lists the new host", func(p *v1alpha1.Plugin) (bool, string) {
		pa := p.Status.PendingApproval
		return p.Status.ObservedGeneration == p.Generation && pa != nil && slices.Equal(pa.Egress, []string{"static.nbp.pl:443"}) &&
			len(pa.Capabilities) == 0 && len(pa.Secrets) == 0, "pending " + describeJSON(pa)
	})
	if ar := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired); ar == nil || ar.Status != metav1.ConditionTrue {
		t.Errorf("ApprovalRequired = %+v, want True", ar)
	}
	if img := f.runningImage(v1.Name); img != v1.Spec.Image {
		t.Errorf("Deployment runs %q, want the previous %s", img, v1.Spec.Image)
	}
	if got.Status.Deployed == nil || got.Status.Deployed.Image != v1.Spec.Image {
		t.Errorf("status.deployed = %+v, want the previous image", got.Status.Deployed)
	}

	// Narrowing the grant takes effect at once, even while the upgrade waits.
	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) { g.Spec.Egress = nil })
	testutil.Eventually(t, waitTimeout, "narrowed grant applied", func() (bool, string) {
		v, ok := f.allowList(v1.Name)
		var dep appsv1.Deployment
		f.exists(v1.Name, &dep)
		return ok && v == "" && len(tokenAudiences(&dep)) == 1, "allow-list " + v
	})
	var np networkingv1.NetworkPolicy
	f.exists(v1.Name, &np)
	if len(np.Spec.Egress) != 1 {
		t.Errorf("NetworkPolicy still allows the proxy: %d egress rules", len(np.Spec.Egress))
	}

	// Approving the whole new request rolls the new version out.
	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) {
		g.Spec.Egress = []v1alpha1.EgressHost{"api.nbp.pl", "static.nbp.pl"}
	})
	testutil.Eventually(t, waitTimeout, "new version deployed", func() (bool, string) {
		img := f.runningImage(v1.Name)
		return img == v2image, img
	})
}

func TestFirstInstallBeyondGrantAwaitsApproval(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("beyond", testutil.Image("beyond-1")).Egress("api.nbp.pl", "static.nbp.pl").Obj()
	f.images.sign(p.Spec.Image)
	f.create(p, testutil.MakeGrant(p.Name).Capabilities("connector").Egress("api.nbp.pl").Obj())

	got := f.waitReady(p.Name, v1alpha1.ReasonAwaitingApproval)
	f.waitTornDown(p.Name)
	if pa := got.Status.PendingApproval; pa == nil || !slices.Equal(pa.Egress, []string{"static.nbp.pl:443"}) {
		t.Errorf("pending = %s", describeJSON(pa))
	}
}

func TestTagAndDigestIsInvalidAndPreviousKeepsRunning(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("tagged", testutil.Image("tagged-1")).Obj()
	f.run(p)

	tagged := "registry.example.com/plugins/tagged:1.0@" + testutil.Digest("tagged-2")
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) { p.Spec.Image = tagged })
	got := f.waitPlugin(p.Name, "InvalidImage", func(p *v1alpha1.Plugin) (bool, string) {
		sv := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return p.Status.ObservedGeneration == p.Generation && sv != nil && sv.Status == metav1.ConditionFalse && sv.Reason == v1alpha1.ReasonInvalidImage,
			describeJSON(p.Status.Conditions)
	})
	if ar := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired); ar == nil ||
		ar.Status != metav1.ConditionUnknown || ar.Reason != v1alpha1.ReasonInvalidSpec {
		t.Errorf("ApprovalRequired = %+v, want Unknown/InvalidSpec", ar)
	}
	if f.runningImage(p.Name) != p.Spec.Image {
		t.Errorf("the previous version does not keep running")
	}
	if r := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != v1alpha1.ReasonProgressing {
		t.Errorf("Ready = %+v, want Progressing while the previous version starts (no Deployment controller here)", r)
	}

	// Without an earlier version, the same spec runs nothing.
	fresh := testutil.MakePlugin("tagged-fresh", tagged).Obj()
	f.create(fresh, testutil.GrantFor(fresh).Obj())
	f.waitReady(fresh.Name, v1alpha1.ReasonInvalidSpec)
	f.waitTornDown(fresh.Name)
}

func TestInvalidConfigRunsNothing(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("badconfig", testutil.Image("badconfig-1")).
		ConfigSchema(`{"type":"object","required":["currency"],"properties":{"currency":{"type":"string"}}}`).
		Config(`{"currency": 7}`).Obj()
	f.images.sign(p.Spec.Image)
	f.create(p, testutil.GrantFor(p).Obj())

	got := f.waitReady(p.Name, v1alpha1.ReasonInvalidConfig)
	f.waitTornDown(p.Name)
	if msg := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "currency") {
		t.Errorf("message %q does not name the field", msg)
	}

	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Config.Raw = []byte(`{"currency":"PLN"}`)
	})
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	var cm corev1.ConfigMap
	f.exists(p.Name, &cm)
	if cm.Data[configKey] != `{"currency":"PLN"}` {
		t.Errorf("config ConfigMap = %q", cm.Data[configKey])
	}
}

func TestRefusedSignatureDeploysNothing(t *testing.T) {
	f := newFixture(t) // nothing signed
	p := testutil.MakePlugin("unsigned", testutil.Image("unsigned-1")).Obj()
	f.create(p, testutil.GrantFor(p).Obj())

	got := f.waitReady(p.Name, v1alpha1.ReasonSignatureNotVerified)
	f.waitTornDown(p.Name)
	sv := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if sv == nil || sv.Status != metav1.ConditionFalse || sv.Reason != v1alpha1.ReasonUnsigned {
		t.Errorf("SignatureVerified = %+v, want False/Unsigned", sv)
	}
}

func TestCoreServiceMissingIsClusterUnavailable(t *testing.T) {
	f := newFixture(t)
	defer f.operator.stop() // before the cleanup puts the Service back

	// A core Service whose selector would match plugin pods is refused too.
	p := testutil.MakePlugin("nocore", testutil.Image("nocore-1")).Obj()
	f.run(p)

	var core corev1.Service
	if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: DefaultCoreService}, &core); err != nil {
		t.Fatal(err)
	}
	f.delete(&core)
	t.Cleanup(func() { testCluster(t) }) // puts the Service back for the other tests
	got := f.waitReady(p.Name, v1alpha1.ReasonClusterUnavailable)
	// Nothing runs, but the episode is transient: the Deployment is scaled to
	// zero with its record, which status.deployed still reports (OF-2).
	f.waitParked(p.Name)
	if got.Status.Deployed == nil || got.Status.Deployed.Image != p.Spec.Image {
		t.Errorf("deployed = %+v, want the parked %s", got.Status.Deployed, p.Spec.Image)
	}
}

func TestCRDSchemaRefusesBadInput(t *testing.T) {
	_, cl := testCluster(t)
	tests := map[string]*v1alpha1.Plugin{
		"tag only":            testutil.MakePlugin("tagonly", "registry.example.com/p:1.0").Obj(),
		"57-character name":   testutil.MakePlugin("a"+strings.Repeat("b", 56), testutil.Image("long")).Obj(),
		"name with uppercase": testutil.MakePlugin("Upper", testutil.Image("upper")).Obj(),
		"unknown capability":  testutil.MakePlugin("badcap", testutil.Image("badcap")).Capabilities("admin").Obj(),
		"65 egress hosts": func() *v1alpha1.Plugin {
			w := testutil.MakePlugin("manyhosts", testutil.Image("manyhosts"))
			for i := range 65 {
				w.Egress("h" + strings.Repeat("x", i) + ".example.com")
			}
			return w.Obj()
		}(),
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			err := cl.Create(context.Background(), p)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create = %v, want the API server to refuse it as invalid", err)
			}
		})
	}
	ok := testutil.MakePlugin("a"+strings.Repeat("b", 55), testutil.Image("ok56")).Obj()
	if err := cl.Create(context.Background(), ok); err != nil {
		t.Errorf("a 56-character name is refused: %v", err)
	}
}

func TestHandEditIsRevertedOtherManagersFieldStays(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("handedit", testutil.Image("handedit-1")).Obj()
	f.run(p)

	// Someone else's manager changes the operator's image and adds a label.
	var dep appsv1.Deployment
	f.exists(p.Name, &dep)
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Template.Spec.Containers[0].Image = "evil.example.com/x@" + testutil.Digest("evil")
	if dep.Labels == nil {
		dep.Labels = map[string]string{}
	}
	dep.Labels["team"] = "ops"
	if err := f.cl.Patch(context.Background(), &dep, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "image restored", func() (bool, string) {
		var d appsv1.Deployment
		f.exists(p.Name, &d)
		img := d.Spec.Template.Spec.Containers[0].Image
		return img == p.Spec.Image && d.Labels["team"] == "ops", img + " team=" + d.Labels["team"]
	})
}

func TestTwoInstancesMountTheirOwnSecrets(t *testing.T) {
	f := newFixture(t)
	image := testutil.Image("ibkr-flex")
	f.images.sign(image)
	for _, inst := range []struct{ name, secret string }{{"ibkr-a", "ibkr-account-a"}, {"ibkr-b", "ibkr-account-b"}} {
		p := testutil.MakePlugin(inst.name, image).Secret("ibkr-flex-credentials", "/etc/ibkr").Obj()
		f.create(p, testutil.MakeGrant(inst.name).Capabilities("connector").Secret("ibkr-flex-credentials", inst.secret).Obj())
		got := f.waitReady(inst.name, v1alpha1.ReasonProgressing)
		var dep appsv1.Deployment
		f.exists(inst.name, &dep)
		var secrets []string
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
			}
		}
		if !slices.Equal(secrets, []string{inst.secret}) {
			t.Errorf("%s mounts %v, want [%s]", inst.name, secrets, inst.secret)
		}
		if e := got.Status.Effective; e == nil || len(e.Secrets) != 1 || e.Secrets[0].SecretName != inst.secret {
			t.Errorf("%s effective secrets = %s", inst.name, describeJSON(got.Status.Effective))
		}
	}
}

func TestSteadyStateSendsNoWrites(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("steady", testutil.Image("steady-1")).Egress("api.nbp.pl").Obj()
	f.run(p)
	f.waitWritesSettle() // the writes of convergence, and of the start

	before := f.operator.writes.writes.Load()
	// A label on the Plugin changes nothing the operator computes but
	// triggers reconciles of it (and the grant does too).
	label(t, f.cl, p.DeepCopy(), "touched", "yes")
	label(t, f.cl, testutil.MakeGrant(p.Name).Obj(), "touched", "yes")
	time.Sleep(2 * time.Second)
	if n := f.operator.writes.writes.Load() - before; n != 0 {
		t.Errorf("steady-state reconciles sent %d writes, want 0", n)
	}
}

func TestRestartDuringRegistryOutageKeepsRunningVersion(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("outage", testutil.Image("outage-1")).Obj()
	f.run(p)
	f.operator.stop()

	// A new operator starts while the registry is unreachable.
	down := newFakeImages()
	down.setDown(true)
	startOperator(t, f.cluster, down)
	f.waitPlugin(p.Name, "RegistryUnavailable seen", func(p *v1alpha1.Plugin) (bool, string) {
		sv := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return sv != nil && sv.Reason == v1alpha1.ReasonRegistryUnavailable, describeJSON(sv)
	})
	if f.runningImage(p.Name) != p.Spec.Image {
		t.Fatal("the verified running version was torn down during the outage")
	}

	// A new, never-verified version does not deploy while the registry is down.
	next := testutil.Image("outage-2")
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) { p.Spec.Image = next })
	f.waitPlugin(p.Name, "new generation observed", func(p *v1alpha1.Plugin) (bool, string) {
		return p.Status.ObservedGeneration == p.Generation, ""
	})
	time.Sleep(500 * time.Millisecond)
	if img := f.runningImage(p.Name); img != p.Spec.Image {
		t.Errorf("Deployment runs %q during the outage, want the verified %s", img, p.Spec.Image)
	}
}

// TestRegistryRetryChecksAgain: a Plugin whose registry cannot be read
// waits, its SignatureVerified message says how soon it is tried again
// (--registry-retry), and once the registry serves it runs on that retry
// alone: nothing else changes that would queue it. With the default of a
// minute it would not within the bound.
func TestRegistryRetryChecksAgain(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	images.setDown(true)
	const retry = 2 * time.Second
	startOperatorWith(t, c, images, 0, func(o *Options) { o.RegistryRetry = retry })
	f := &fixture{t: t, cluster: c, cl: cl, images: images}
	p := testutil.MakePlugin("retried", testutil.Image("retried-1")).Obj()
	images.sign(p.Spec.Image)
	f.create(p, testutil.GrantFor(p).Obj())
	f.waitPlugin(p.Name, "RegistryUnavailable with its retry", func(p *v1alpha1.Plugin) (bool, string) {
		sv := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return sv != nil && sv.Reason == v1alpha1.ReasonRegistryUnavailable && strings.Contains(sv.Message, "retrying every 2s"), describeJSON(sv)
	})
	images.setDown(false)
	back := time.Now()
	testutil.Eventually(t, 10*retry, "the plugin verified on the retry", func() (bool, string) {
		var got v1alpha1.Plugin
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err.Error()
		}
		sv := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return sv != nil && sv.Status == metav1.ConditionTrue, describeJSON(sv)
	})
	t.Logf("verified %s after the registry served again (retry every %s)", time.Since(back).Round(100*time.Millisecond), retry)
}

func TestPluginDeletedWhileOperatorDownLosesAllowListKey(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("orphan", testutil.Image("orphan-1")).Egress("api.nbp.pl").Obj()
	f.run(p)
	// A key that only opens hosts is written with the writer's next batch
	// (OF-15), so it may land just after the plugin runs.
	testutil.Eventually(t, waitTimeout, "allow-list key while running", func() (bool, string) {
		_, ok := f.allowList(p.Name)
		return ok, "no key"
	})
	f.operator.stop()
	f.delete(p)
	startOperator(t, f.cluster, f.images)
	testutil.Eventually(t, waitTimeout, "orphaned key pruned", func() (bool, string) {
		_, ok := f.allowList(p.Name)
		return !ok, "key still there"
	})
}
