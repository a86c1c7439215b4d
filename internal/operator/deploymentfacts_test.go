package operator

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestStripForCacheDropsManagedFields: nothing reads managed fields from a
// cache (holds reads them from whole objects), so the caches keep none, of
// any kind, and objects without any pass unchanged.
func TestStripForCacheDropsManagedFields(t *testing.T) {
	entries := func() []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
		}
	}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "plugin-a", Namespace: plugins.Namespace, ManagedFields: entries(), Labels: PodLabels("a")}
	}
	objs := append(ownedPrototypes(meta()), &v1alpha1.Plugin{ObjectMeta: meta()}, &metav1.PartialObjectMetadata{ObjectMeta: meta()})
	for _, obj := range objs {
		if _, err := stripForCache(obj); err != nil {
			t.Fatal(err)
		}
		if got := obj.GetManagedFields(); got != nil {
			t.Errorf("%T keeps managed fields %s", obj, describeJSON(got))
		}
		if obj.GetName() != "plugin-a" || obj.GetLabels()[plugins.LabelPluginName] != "a" {
			t.Errorf("%T lost its name or labels: %s", obj, describeJSON(obj))
		}
	}
}

// TestFactsOfDeployment: what the operator remembers of a Deployment
// answers as the Deployment itself: available as deploymentAvailable, the
// verified-version record as readVerifiedVersion, the images, the replicas.
func TestFactsOfDeployment(t *testing.T) {
	at := metav1.Now()
	for _, available := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, ""} {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: at, LastTransitionTime: at},
				},
			},
		}
		if available != "" {
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: available, LastUpdateTime: at, LastTransitionTime: at})
		}
		if got, want := factsOf(d).available, available == corev1.ConditionTrue; got != want || deploymentAvailable(d) != want {
			t.Errorf("Available %q: facts say %v, deploymentAvailable %v, want %v", available, got, deploymentAvailable(d), want)
		}
		d.Status.ObservedGeneration = 2
		if factsOf(d).available {
			t.Errorf("Available %q: a generation the controller has not observed counts as available", available)
		}
	}

	p := testutil.MakePlugin("facts", testutil.Image("facts-1")).Obj()
	p.UID = types.UID("uid-facts")
	rec, err := encodeVerifiedVersion(&v1alpha1.DeployedVersion{Image: p.Spec.Image, VerifiedAt: &metav1.Time{Time: at.Time}})
	if err != nil {
		t.Fatal(err)
	}
	objs := BuildObjects(p, p.Spec.Image, nil, plugins.Workload{}, Cluster{Gate: IsolationGate{Image: testutil.GateImage}})
	setVerifiedVersion(objs.Deployment, rec)
	f := factsOf(objs.Deployment)
	if f.image != p.Spec.Image || f.gate != testutil.GateImage || f.record != rec || !f.hasRecord || f.scaledToZero {
		t.Errorf("facts %+v, want image %s, gate %s and the record", f, p.Spec.Image, testutil.GateImage)
	}
	for _, tt := range []struct {
		name string
		edit func(*appsv1.Deployment)
	}{
		{"as built", func(*appsv1.Deployment) {}},
		{"another Plugin's", func(d *appsv1.Deployment) { d.OwnerReferences[0].UID = "uid-other" }},
		{"no controller", func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{"another ServiceAccount", func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "default" }},
		{"no record", func(d *appsv1.Deployment) { delete(d.Spec.Template.Annotations, AnnotationVerifiedVersion) }},
		{"a record of another image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = testutil.Image("facts-2") }},
		{"a malformed record", func(d *appsv1.Deployment) { d.Spec.Template.Annotations[AnnotationVerifiedVersion] = "{" }},
		{"scaled to zero", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }},
	} {
		d := objs.Deployment.DeepCopy()
		tt.edit(d)
		want, wantErr := readWholeRecord(d, p)
		got, gotErr := factsOf(d).verifiedVersion(p)
		if describeJSON(got) != describeJSON(want) || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("%s: facts give %s, %v; the Deployment %s, %v", tt.name, describeJSON(got), gotErr, describeJSON(want), wantErr)
		}
		if factsOf(d).scaledToZero != (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			t.Errorf("%s: scaledToZero %v for replicas %v", tt.name, factsOf(d).scaledToZero, d.Spec.Replicas)
		}
	}
}

// readWholeRecord reads the verified-version record as the operator did
// from the Deployment itself, before it remembered facts.
func readWholeRecord(d *appsv1.Deployment, p *v1alpha1.Plugin) (*v1alpha1.DeployedVersion, error) {
	if owner := metav1.GetControllerOfNoCopy(d); owner == nil || owner.UID != p.UID || owner.Kind != "Plugin" {
		return nil, nil
	}
	if d.Spec.Template.Spec.ServiceAccountName != plugins.ServiceAccountName(p.Name) {
		return nil, nil
	}
	raw, ok := d.Spec.Template.Annotations[AnnotationVerifiedVersion]
	if !ok {
		return nil, errNoRecord
	}
	rec, err := decodeVerifiedVersion(raw)
	if err != nil {
		return nil, err
	}
	if img := runningImage(d); img != rec.Image {
		return nil, errors.New("it names " + rec.Image + ", but " + img + " runs")
	}
	return rec, nil
}
