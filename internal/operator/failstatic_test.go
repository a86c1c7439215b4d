//go:build cluster

package operator

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// Fail static (OF-2) keeps a verified version running through a registry
// outage. These tests check that what it trusts is the operator's own record
// on the plugin's Deployment, not status.deployed, which anyone who may write
// plugins/status can set.

// forgeDeployed writes status.deployed of the Plugin as someone with
// plugins/status access could: image with p's manifest, "verified" now.
func (f *fixture) forgeDeployed(name, image string) {
	f.t.Helper()
	for range 10 {
		var p v1alpha1.Plugin
		if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
			f.t.Fatal(err)
		}
		p.Status.Deployed = &v1alpha1.DeployedVersion{
			Image: image, Manifest: p.Spec.Manifest, Signer: "forger", Trust: v1alpha1.ReasonSignedByTrustedSigner,
			VerifiedAt: &metav1.Time{Time: time.Now().UTC().Truncate(time.Second)},
		}
		if err := f.cl.Status().Update(context.Background(), &p); err == nil {
			return
		}
	}
	f.t.Fatal("could not write status.deployed")
}

// neverRuns watches the plugin's Deployment for d and fails the test if it
// ever runs image.
func (f *fixture) neverRuns(name, image string, d time.Duration) {
	f.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if got := f.runningImage(name); got == image {
			f.t.Fatalf("the Deployment runs the forged image %s", got)
		}
	}
}

func TestForgedDeployedStatusIsNotTrusted(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("forged", testutil.Image("forged-1")).Obj()
	f.run(p)
	evil := testutil.Image("forged-evil") // never signed
	f.images.setDown(true)

	// Someone who may write plugins/status only names another image as the
	// version that runs, while the registry cannot say otherwise.
	f.forgeDeployed(p.Name, evil)
	f.neverRuns(p.Name, evil, 3*time.Second)
	if img := f.runningImage(p.Name); img != p.Spec.Image {
		t.Fatalf("the Deployment runs %q, want the verified %s", img, p.Spec.Image)
	}
	f.waitPlugin(p.Name, "status.deployed reports what runs again", func(p *v1alpha1.Plugin) (bool, string) {
		d := p.Status.Deployed
		return d != nil && d.Image != evil && d.Signer == "test-owner", describeJSON(d)
	})

	// Someone who may also write the spec points it at the forged image and
	// forges the record to match, so the outage would pass it as verified.
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) { p.Spec.Image = evil })
	f.forgeDeployed(p.Name, evil)
	f.neverRuns(p.Name, evil, 3*time.Second)
	if img := f.runningImage(p.Name); img != p.Spec.Image {
		t.Fatalf("the Deployment runs %q, want the verified %s", img, p.Spec.Image)
	}
}

// markAvailable writes the Deployment's status as the Deployment controller
// would once its one pod is available (minimal mode has no such controller);
// a Deployment scaled to zero is left alone.
func (f *fixture) markAvailable(name string) {
	f.t.Helper()
	var d appsv1.Deployment
	if !f.exists(name, &d) || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 || deploymentAvailable(&d) {
		return
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if err := f.cl.Status().Update(context.Background(), &d); err != nil {
		f.t.Logf("mark %s available: %v", d.Name, err)
	}
}

// waitReadyAvailable is waitReady with the plugin's Deployment made available
// whenever it runs a pod.
func (f *fixture) waitReadyAvailable(name, reason string) *v1alpha1.Plugin {
	f.t.Helper()
	return f.waitPlugin(name, "Ready="+reason, func(p *v1alpha1.Plugin) (bool, string) {
		f.markAvailable(name)
		c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && p.Status.ObservedGeneration == p.Generation, c.Reason + ": " + c.Message
	})
}

// waitParked waits until nothing of the plugin runs or reaches anything,
// while its Deployment, scaled to zero, keeps the record of what ran: no
// allow-list key, a deny-all NetworkPolicy (ClusterUnavailable).
func (f *fixture) waitParked(name string) {
	f.t.Helper()
	testutil.Eventually(f.t, waitTimeout, name+" parked", func() (bool, string) {
		var d appsv1.Deployment
		if !f.exists(name, &d) {
			return false, "no Deployment"
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			return false, "the Deployment is not scaled to zero"
		}
		if d.Spec.Template.Annotations[AnnotationVerifiedVersion] == "" {
			return false, "the Deployment has no record"
		}
		var np networkingv1.NetworkPolicy
		if !f.exists(name, &np) || len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
			return false, "the NetworkPolicy is not deny-all"
		}
		if _, ok := f.allowList(name); ok {
			return false, "the allow-list key remains"
		}
		return true, ""
	})
}

func TestClusterUnavailableKeepsPreviousVersion(t *testing.T) {
	f := newFixture(t)
	defer f.operator.stop() // before the cleanup puts the Service back

	v1 := testutil.MakePlugin("episode", testutil.Image("episode-1")).Obj()
	f.run(v1)
	f.waitReadyAvailable(v1.Name, v1alpha1.ReasonRunning)
	// The vendor's next version asks for a host the grant does not hold:
	// the previous version keeps running.
	v2image := testutil.Image("episode-2")
	f.images.sign(v2image)
	update(t, f.cl, v1.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2image
		p.Spec.Manifest.Egress = []v1alpha1.EgressHost{"api.nbp.pl"}
	})
	f.waitReadyAvailable(v1.Name, v1alpha1.ReasonRunningPreviousVersion)

	// The core's Service goes away for a while: nothing may run, since the
	// NetworkPolicy cannot be written (fail closed).
	var core corev1.Service
	if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: DefaultCoreService}, &core); err != nil {
		t.Fatal(err)
	}
	f.delete(&core)
	t.Cleanup(func() { testCluster(t) }) // the Service back for the other tests, whatever happens
	got := f.waitReady(v1.Name, v1alpha1.ReasonClusterUnavailable)
	f.waitParked(v1.Name)
	if d := got.Status.Deployed; d == nil || d.Image != v1.Spec.Image {
		t.Errorf("status.deployed during the episode = %s, want the previous version %s", describeJSON(d), v1.Spec.Image)
	}

	// The Service comes back: the previous version runs again, without the
	// owner doing anything.
	testCluster(t)
	got = f.waitReadyAvailable(v1.Name, v1alpha1.ReasonRunningPreviousVersion)
	if img := f.runningImage(v1.Name); img != v1.Spec.Image {
		t.Errorf("the Deployment runs %q, want the previous version %s", img, v1.Spec.Image)
	}
	if d := got.Status.Deployed; d == nil || d.Image != v1.Spec.Image {
		t.Errorf("status.deployed = %s, want the previous version %s", describeJSON(d), v1.Spec.Image)
	}
	var dep appsv1.Deployment
	if !f.exists(v1.Name, &dep) || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("the Deployment does not run its one replica: %s", describeJSON(dep.Spec.Replicas))
	}
}

// stripRecord makes the plugin's Deployment look like one an older operator
// applied, which kept the record in status.deployed only.
func (f *fixture) stripRecord(name string) {
	f.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(name)}}
	update(f.t, f.cl, d, func(d *appsv1.Deployment) { delete(d.Spec.Template.Annotations, AnnotationVerifiedVersion) })
}

func TestLegacyRecordKeepsRunningOnceVerified(t *testing.T) {
	f := newFixture(t)
	v1 := testutil.MakePlugin("legacy", testutil.Image("legacy-1")).Obj()
	f.run(v1)
	v2image := testutil.Image("legacy-2")
	f.images.sign(v2image)
	update(t, f.cl, v1.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2image
		p.Spec.Manifest.Egress = []v1alpha1.EgressHost{"api.nbp.pl"}
	})
	f.waitPlugin(v1.Name, "the upgrade waiting for approval", func(p *v1alpha1.Plugin) (bool, string) {
		return p.Status.ObservedGeneration == p.Generation && p.Status.PendingApproval != nil, describeJSON(p.Status.PendingApproval)
	})

	// The operator is upgraded: the Deployment of the older one has no
	// record, status.deployed names the image it runs. The registry answers,
	// so the previous version verifies and keeps running, now with a record.
	f.operator.stop()
	f.stripRecord(v1.Name)
	f.operator = startOperator(t, f.cluster, f.images)
	testutil.Eventually(t, waitTimeout, "the record written", func() (bool, string) {
		var d appsv1.Deployment
		if !f.exists(v1.Name, &d) {
			return false, "no Deployment"
		}
		rec, err := decodeVerifiedVersion(d.Spec.Template.Annotations[AnnotationVerifiedVersion])
		return err == nil && rec.Image == v1.Spec.Image && runningImage(&d) == v1.Spec.Image, describeJSON(rec)
	})
}

func TestLegacyRecordIsNotTrustedWhileRegistryIsDown(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("legacy-down", testutil.Image("legacy-down-1")).Obj()
	f.run(p)
	f.operator.stop()
	f.stripRecord(p.Name)

	// Nothing vouches for a record in status.deployed, and the registry
	// cannot: nothing runs (fail closed), until the registry answers.
	down := newFakeImages()
	down.setDown(true)
	startOperator(t, f.cluster, down)
	f.waitTornDown(p.Name)
	down.sign(p.Spec.Image)
	down.setDown(false)
	label(t, f.cl, p.DeepCopy(), "retry", "now") // sooner than the registry retry
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	if img := f.runningImage(p.Name); img != p.Spec.Image {
		t.Errorf("the Deployment runs %q, want %s", img, p.Spec.Image)
	}
}
