package operator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

func objKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(name)}
}

// exists reports whether the object of the plugin's name exists.
func exists(t *testing.T, cl client.Client, name string, obj client.Object) bool {
	t.Helper()
	err := cl.Get(context.Background(), objKey(name), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// allowList returns the plugin's allow-list value and whether it has a key.
func allowList(t *testing.T, cl client.Client, name string) (string, bool) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := cl.Get(context.Background(), allowListKey, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false
		}
		t.Fatal(err)
	}
	v, ok := cm.Data[name]
	return v, ok
}

// waitTornDown waits until only a deny-all NetworkPolicy is left of the plugin.
func waitTornDown(t *testing.T, cl client.Client, name string) {
	t.Helper()
	eventually(t, name+" torn down", func() (bool, string) {
		if exists(t, cl, name, &appsv1.Deployment{}) || exists(t, cl, name, &corev1.Service{}) ||
			exists(t, cl, name, &corev1.ServiceAccount{}) || exists(t, cl, name, &corev1.ConfigMap{}) {
			return false, "workload objects remain"
		}
		var np networkingv1.NetworkPolicy
		if !exists(t, cl, name, &np) {
			return false, "no NetworkPolicy"
		}
		if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
			return false, "NetworkPolicy is not deny-all"
		}
		if _, ok := allowList(t, cl, name); ok {
			return false, "allow-list key remains"
		}
		return true, ""
	})
}

func create(t *testing.T, cl client.Client, obj client.Object) {
	t.Helper()
	if err := cl.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// update re-reads obj and applies mutate, retrying on conflicts.
func update[T client.Object](t *testing.T, cl client.Client, obj T, mutate func(T)) {
	t.Helper()
	for range 10 {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		mutate(obj)
		err := cl.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("update kept conflicting")
}

func TestNoGrantRunsNothing(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	p := newPlugin("nogrant", testutil.Image("nogrant-1")).egress("api.nbp.pl").build()
	images.sign(p.Spec.Image)
	create(t, cl, p)

	got := waitReady(t, cl, p.Name, v1alpha1.ReasonNoGrant)
	waitTornDown(t, cl, p.Name)
	ar := findCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired)
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
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	p := newPlugin("revoke", testutil.Image("revoke-1")).egress("api.nbp.pl").secret("nbp-token", "/etc/nbp").build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	g := grantFor(p)
	create(t, cl, g)

	// Minimal mode has no Deployment controller: the workload is applied and
	// Ready waits at Progressing.
	got := waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)
	var dep appsv1.Deployment
	if !exists(t, cl, p.Name, &dep) {
		t.Fatal("no Deployment")
	}
	assertHardenedPod(t, &dep, p.Spec.Image)
	assertTokens(t, &dep, []string{plugins.AudienceCore, plugins.AudienceEgress})
	if v, ok := allowList(t, cl, p.Name); !ok || v != "api.nbp.pl:443\n" {
		t.Errorf("allow-list = %q (present %v), want api.nbp.pl:443", v, ok)
	}
	if got.Status.Deployed == nil || got.Status.Deployed.Image != p.Spec.Image || got.Status.Deployed.VerifiedAt == nil {
		t.Errorf("deployed = %+v", got.Status.Deployed)
	}
	var np networkingv1.NetworkPolicy
	exists(t, cl, p.Name, &np)
	assertNoDNS(t, &np)
	if len(np.Spec.Egress) != 2 || len(np.Spec.Ingress) != 1 {
		t.Errorf("NetworkPolicy rules: %d ingress, %d egress; want 1 and 2", len(np.Spec.Ingress), len(np.Spec.Egress))
	}

	if err := cl.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cl, p.Name, v1alpha1.ReasonNoGrant)
	waitTornDown(t, cl, p.Name)
}

func TestUpgradeRequestingNewHostKeepsPreviousVersion(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	v1 := newPlugin("upgrade", testutil.Image("upgrade-1")).egress("api.nbp.pl").build()
	images.sign(v1.Spec.Image)
	create(t, cl, v1)
	g := grantFor(v1)
	create(t, cl, g)
	waitReady(t, cl, v1.Name, v1alpha1.ReasonProgressing)

	// The vendor's new version asks for one more host.
	v2image := testutil.Image("upgrade-2")
	images.sign(v2image)
	update(t, cl, &v1alpha1.Plugin{ObjectMeta: v1.ObjectMeta}, func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2image
		p.Spec.Manifest.Egress = append(p.Spec.Manifest.Egress, "static.nbp.pl")
	})
	var got v1alpha1.Plugin
	eventually(t, "pending lists the new host", func() (bool, string) {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(v1), &got); err != nil {
			return false, err.Error()
		}
		pa := got.Status.PendingApproval
		return got.Status.ObservedGeneration == got.Generation && pa != nil && slices.Equal(pa.Egress, []string{"static.nbp.pl:443"}) &&
			len(pa.Capabilities) == 0 && len(pa.Secrets) == 0, "pending " + describeJSON(pa)
	})
	if ar := findCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired); ar == nil || ar.Status != metav1.ConditionTrue {
		t.Errorf("ApprovalRequired = %+v, want True", ar)
	}
	var dep appsv1.Deployment
	exists(t, cl, v1.Name, &dep)
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != v1.Spec.Image {
		t.Errorf("Deployment runs %s, want the previous %s", img, v1.Spec.Image)
	}
	if got.Status.Deployed == nil || got.Status.Deployed.Image != v1.Spec.Image {
		t.Errorf("status.deployed = %+v, want the previous image", got.Status.Deployed)
	}

	// Narrowing the grant takes effect at once, even while the upgrade waits.
	update(t, cl, &v1alpha1.PluginGrant{ObjectMeta: g.ObjectMeta}, func(g *v1alpha1.PluginGrant) { g.Spec.Egress = nil })
	eventually(t, "narrowed grant applied", func() (bool, string) {
		v, ok := allowList(t, cl, v1.Name)
		var dep appsv1.Deployment
		exists(t, cl, v1.Name, &dep)
		return ok && v == "" && len(tokenAudiences(&dep)) == 1, "allow-list " + v
	})
	var np networkingv1.NetworkPolicy
	exists(t, cl, v1.Name, &np)
	if len(np.Spec.Egress) != 1 {
		t.Errorf("NetworkPolicy still allows the proxy: %d egress rules", len(np.Spec.Egress))
	}

	// Approving the whole new request rolls the new version out.
	update(t, cl, &v1alpha1.PluginGrant{ObjectMeta: g.ObjectMeta}, func(g *v1alpha1.PluginGrant) {
		g.Spec.Egress = []v1alpha1.EgressHost{"api.nbp.pl", "static.nbp.pl"}
	})
	eventually(t, "new version deployed", func() (bool, string) {
		var dep appsv1.Deployment
		exists(t, cl, v1.Name, &dep)
		img := dep.Spec.Template.Spec.Containers[0].Image
		return img == v2image, img
	})
}

func TestFirstInstallBeyondGrantAwaitsApproval(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	p := newPlugin("beyond", testutil.Image("beyond-1")).egress("api.nbp.pl", "static.nbp.pl").build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	g := grantFor(p)
	g.Spec.Egress = g.Spec.Egress[:1]
	create(t, cl, g)
	got := waitReady(t, cl, p.Name, v1alpha1.ReasonAwaitingApproval)
	waitTornDown(t, cl, p.Name)
	if pa := got.Status.PendingApproval; pa == nil || !slices.Equal(pa.Egress, []string{"static.nbp.pl:443"}) {
		t.Errorf("pending = %s", describeJSON(pa))
	}
}

func TestTagAndDigestIsInvalidAndPreviousKeepsRunning(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	p := newPlugin("tagged", testutil.Image("tagged-1")).build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)

	tagged := "registry.example.com/plugins/tagged:1.0@" + testutil.Digest("tagged-2")
	update(t, cl, &v1alpha1.Plugin{ObjectMeta: p.ObjectMeta}, func(p *v1alpha1.Plugin) { p.Spec.Image = tagged })
	var got v1alpha1.Plugin
	eventually(t, "InvalidImage", func() (bool, string) {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err.Error()
		}
		sv := findCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return got.Status.ObservedGeneration == got.Generation && sv != nil && sv.Status == metav1.ConditionFalse && sv.Reason == v1alpha1.ReasonInvalidImage,
			describeJSON(got.Status.Conditions)
	})
	if ar := findCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired); ar.Status != metav1.ConditionUnknown || ar.Reason != v1alpha1.ReasonInvalidSpec {
		t.Errorf("ApprovalRequired = %s/%s, want Unknown/InvalidSpec", ar.Status, ar.Reason)
	}
	var dep appsv1.Deployment
	if !exists(t, cl, p.Name, &dep) || dep.Spec.Template.Spec.Containers[0].Image != p.Spec.Image {
		t.Errorf("the previous version does not keep running")
	}
	if r := findCondition(got.Status.Conditions, v1alpha1.ConditionReady); r.Reason != v1alpha1.ReasonProgressing {
		t.Errorf("Ready = %s, want Progressing while the previous version starts (no Deployment controller here)", r.Reason)
	}

	// Without an earlier version, the same spec runs nothing.
	fresh := newPlugin("tagged-fresh", tagged).build()
	create(t, cl, fresh)
	create(t, cl, grantFor(fresh))
	waitReady(t, cl, fresh.Name, v1alpha1.ReasonInvalidSpec)
	waitTornDown(t, cl, fresh.Name)
}

func TestInvalidConfigRunsNothing(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	p := newPlugin("badconfig", testutil.Image("badconfig-1")).
		schema(`{"type":"object","required":["currency"],"properties":{"currency":{"type":"string"}}}`).
		config(`{"currency": 7}`).build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	got := waitReady(t, cl, p.Name, v1alpha1.ReasonInvalidConfig)
	waitTornDown(t, cl, p.Name)
	if msg := findCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "currency") {
		t.Errorf("message %q does not name the field", msg)
	}

	update(t, cl, &v1alpha1.Plugin{ObjectMeta: p.ObjectMeta}, func(p *v1alpha1.Plugin) {
		p.Spec.Config.Raw = []byte(`{"currency":"PLN"}`)
	})
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)
	var cm corev1.ConfigMap
	exists(t, cl, p.Name, &cm)
	if cm.Data[configKey] != `{"currency":"PLN"}` {
		t.Errorf("config ConfigMap = %q", cm.Data[configKey])
	}
}

func TestRefusedSignatureDeploysNothing(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages() // nothing signed
	startOperator(t, c, images)

	p := newPlugin("unsigned", testutil.Image("unsigned-1")).build()
	create(t, cl, p)
	create(t, cl, grantFor(p))
	got := waitReady(t, cl, p.Name, v1alpha1.ReasonSignatureNotVerified)
	waitTornDown(t, cl, p.Name)
	sv := findCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if sv.Status != metav1.ConditionFalse || sv.Reason != v1alpha1.ReasonUnsigned {
		t.Errorf("SignatureVerified = %s/%s", sv.Status, sv.Reason)
	}
}

func TestCoreServiceMissingIsClusterUnavailable(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	run := startOperator(t, c, images)
	defer run.stop()

	// A core Service whose selector would match plugin pods is refused too.
	p := newPlugin("nocore", testutil.Image("nocore-1")).build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)

	var core corev1.Service
	if err := cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: DefaultCoreService}, &core); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(context.Background(), &core); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testCluster(t) }) // puts the Service back for the other tests
	got := waitReady(t, cl, p.Name, v1alpha1.ReasonClusterUnavailable)
	waitTornDown(t, cl, p.Name)
	if got.Status.Deployed != nil {
		t.Errorf("deployed = %+v, want none", got.Status.Deployed)
	}
}

func TestCRDSchemaRefusesBadInput(t *testing.T) {
	_, cl := testCluster(t)
	tests := map[string]*v1alpha1.Plugin{
		"tag only":            newPlugin("tagonly", "registry.example.com/p:1.0").build(),
		"57-character name":   newPlugin("a"+strings.Repeat("b", 56), testutil.Image("long")).build(),
		"name with uppercase": newPlugin("Upper", testutil.Image("upper")).build(),
		"unknown capability": func() *v1alpha1.Plugin {
			p := newPlugin("badcap", testutil.Image("badcap")).build()
			p.Spec.Manifest.Capabilities = []v1alpha1.Capability{"admin"}
			return p
		}(),
		"65 egress hosts": func() *v1alpha1.Plugin {
			b := newPlugin("manyhosts", testutil.Image("manyhosts"))
			for i := range 65 {
				b.egress("h" + strings.Repeat("x", i) + ".example.com")
			}
			return b.build()
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
	ok := newPlugin("a"+strings.Repeat("b", 55), testutil.Image("ok56")).build()
	if err := cl.Create(context.Background(), ok); err != nil {
		t.Errorf("a 56-character name is refused: %v", err)
	}
}

func TestHandEditIsRevertedOtherManagersFieldStays(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	p := newPlugin("handedit", testutil.Image("handedit-1")).build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)

	// Someone else's manager changes the operator's image and adds a label.
	var dep appsv1.Deployment
	exists(t, cl, p.Name, &dep)
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Template.Spec.Containers[0].Image = "evil.example.com/x@" + testutil.Digest("evil")
	if dep.Labels == nil {
		dep.Labels = map[string]string{}
	}
	dep.Labels["team"] = "ops"
	if err := cl.Patch(context.Background(), &dep, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "image restored", func() (bool, string) {
		var d appsv1.Deployment
		exists(t, cl, p.Name, &d)
		img := d.Spec.Template.Spec.Containers[0].Image
		return img == p.Spec.Image && d.Labels["team"] == "ops", img + " team=" + d.Labels["team"]
	})
}

func TestTwoInstancesMountTheirOwnSecrets(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	startOperator(t, c, images)

	image := testutil.Image("ibkr-flex")
	images.sign(image)
	for _, inst := range []struct{ name, secret string }{{"ibkr-a", "ibkr-account-a"}, {"ibkr-b", "ibkr-account-b"}} {
		p := newPlugin(inst.name, image).secret("ibkr-flex-credentials", "/etc/ibkr").build()
		create(t, cl, p)
		g := grantFor(p)
		g.Spec.Secrets[0].SecretName = inst.secret
		create(t, cl, g)
		got := waitReady(t, cl, inst.name, v1alpha1.ReasonProgressing)
		var dep appsv1.Deployment
		exists(t, cl, inst.name, &dep)
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
	c, cl := testCluster(t)
	images := newFakeImages()
	run := startOperator(t, c, images)

	p := newPlugin("steady", testutil.Image("steady-1")).egress("api.nbp.pl").build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)
	time.Sleep(time.Second) // let the writes of convergence settle

	before := run.writes.writes.Load()
	// A label on the Plugin changes nothing the operator computes but
	// triggers reconciles of it (and the grant does too).
	update(t, cl, &v1alpha1.Plugin{ObjectMeta: p.ObjectMeta}, func(p *v1alpha1.Plugin) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["touched"] = "yes"
	})
	update(t, cl, &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: plugins.Namespace}}, func(g *v1alpha1.PluginGrant) {
		if g.Labels == nil {
			g.Labels = map[string]string{}
		}
		g.Labels["touched"] = "yes"
	})
	time.Sleep(2 * time.Second)
	if n := run.writes.writes.Load() - before; n != 0 {
		t.Errorf("steady-state reconciles sent %d writes, want 0", n)
	}
}

func TestRestartDuringRegistryOutageKeepsRunningVersion(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	run := startOperator(t, c, images)

	p := newPlugin("outage", testutil.Image("outage-1")).build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)
	run.stop()

	// A new operator starts while the registry is unreachable.
	down := newFakeImages()
	down.setDown(true)
	startOperator(t, c, down)
	var got v1alpha1.Plugin
	eventually(t, "RegistryUnavailable seen", func() (bool, string) {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err.Error()
		}
		sv := findCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return sv != nil && sv.Reason == v1alpha1.ReasonRegistryUnavailable, describeJSON(sv)
	})
	var dep appsv1.Deployment
	if !exists(t, cl, p.Name, &dep) || dep.Spec.Template.Spec.Containers[0].Image != p.Spec.Image {
		t.Fatal("the verified running version was torn down during the outage")
	}

	// A new, never-verified version does not deploy while the registry is down.
	next := testutil.Image("outage-2")
	update(t, cl, &v1alpha1.Plugin{ObjectMeta: p.ObjectMeta}, func(p *v1alpha1.Plugin) { p.Spec.Image = next })
	eventually(t, "new generation observed", func() (bool, string) {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == got.Generation, ""
	})
	time.Sleep(500 * time.Millisecond)
	exists(t, cl, p.Name, &dep)
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != p.Spec.Image {
		t.Errorf("Deployment runs %s during the outage, want the verified %s", img, p.Spec.Image)
	}
}

func TestPluginDeletedWhileOperatorDownLosesAllowListKey(t *testing.T) {
	c, cl := testCluster(t)
	images := newFakeImages()
	run := startOperator(t, c, images)

	p := newPlugin("orphan", testutil.Image("orphan-1")).egress("api.nbp.pl").build()
	images.sign(p.Spec.Image)
	create(t, cl, p)
	create(t, cl, grantFor(p))
	waitReady(t, cl, p.Name, v1alpha1.ReasonProgressing)
	if _, ok := allowList(t, cl, p.Name); !ok {
		t.Fatal("no allow-list key while running")
	}
	run.stop()
	if err := cl.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	startOperator(t, c, images)
	eventually(t, "orphaned key pruned", func() (bool, string) {
		_, ok := allowList(t, cl, p.Name)
		return !ok, "key still there"
	})
}
