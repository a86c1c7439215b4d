package operator

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCompactForCacheKeepsOwnPullSecrets: the cache keeps, of the managed fields, only
// what pullSecretsHeld reads, and reads the same owned pull Secrets from it.
func TestCompactForCacheKeepsOwnPullSecrets(t *testing.T) {
	own := `{"f:metadata":{"f:labels":{"f:openfief.io/plugin":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"plugin\"}":{".":{},"f:image":{}}},"f:imagePullSecrets":{"k:{\"name\":\"pull-a\"}":{}}}}}}`
	entries := func() []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(own)},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:replicas":{}}}`)},
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
		}
	}
	path := []string{"spec", "template", "spec", "imagePullSecrets"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries()}}
	wantNames, wantKeyed, wantOwns := ownedPullSecrets(d.ManagedFields, path)
	if _, err := compactForCache(d); err != nil {
		t.Fatal(err)
	}
	if len(d.ManagedFields) != 1 {
		t.Fatalf("kept %d entries, want the operator's applied one: %s", len(d.ManagedFields), describeJSON(d.ManagedFields))
	}
	if got, want := string(d.ManagedFields[0].FieldsV1.GetRawBytes()), `{"f:spec":{"f:template":{"f:spec":{"f:imagePullSecrets":{"k:{\"name\":\"pull-a\"}":{}}}}}}`; got != want {
		t.Errorf("kept field set\n%s\nwant\n%s", got, want)
	}
	names, keyed, owns := ownedPullSecrets(d.ManagedFields, path)
	if !slices.Equal(names, wantNames) || keyed != wantKeyed || owns != wantOwns || !owns || !slices.Equal(names, []string{"pull-a"}) {
		t.Errorf("ownedPullSecrets after the transform: %v %v %v, before: %v %v %v", names, keyed, owns, wantNames, wantKeyed, wantOwns)
	}

	for _, obj := range []interface {
		GetManagedFields() []metav1.ManagedFieldsEntry
	}{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries()}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries()}},
	} {
		if _, err := compactForCache(obj); err != nil {
			t.Fatal(err)
		}
		if got := obj.GetManagedFields(); got != nil {
			t.Errorf("%T keeps managed fields %s", obj, describeJSON(got))
		}
	}
}

// TestCompactForCacheCutsDeploymentStatus: the cache keeps of a
// Deployment's status only what deploymentAvailable reads, which reads the
// same from it.
func TestCompactForCacheCutsDeploymentStatus(t *testing.T) {
	at := metav1.Now()
	for _, available := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, ""} {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 3, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "x" has successfully progressed.`, LastUpdateTime: at, LastTransitionTime: at},
				},
			},
		}
		if available != "" {
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: available, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: at, LastTransitionTime: at})
		}
		want := deploymentAvailable(d)
		if _, err := compactForCache(d); err != nil {
			t.Fatal(err)
		}
		if got := deploymentAvailable(d); got != want || want != (available == corev1.ConditionTrue) {
			t.Errorf("Available %q: deploymentAvailable %v after the transform, %v before", available, got, want)
		}
		kept := appsv1.DeploymentStatus{ObservedGeneration: 3, UpdatedReplicas: 1}
		if available != "" {
			kept.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: available}}
		}
		if !equality.Semantic.DeepEqual(d.Status, kept) {
			t.Errorf("Available %q: kept status %s, want %s", available, describeJSON(d.Status), describeJSON(kept))
		}
	}
}
