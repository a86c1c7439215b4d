package operator

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestRevocationRunsBeforeRoutineReconciles queues 1,000 routine reconciles
// (what a change to the core's Service enqueues) and then deletes one grant:
// the revoked Plugin is the next one a worker gets, not the 1,001st.
func TestRevocationRunsBeforeRoutineReconciles(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test-revocation")
	defer q.ShutDown()
	for i := range 1000 {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: plugins.Namespace, Name: fmt.Sprintf("routine-%04d", i)}})
	}
	grant := &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: "revoked"}}
	(&grantEvents{}).Delete(context.Background(), event.DeleteEvent{Object: grant}, q)

	got, priority, shutdown := q.GetWithPriority()
	if shutdown {
		t.Fatal("queue shut down")
	}
	if got.Name != "revoked" || priority != RevocationPriority {
		t.Fatalf("next = %s at priority %d, want revoked at %d", got.Name, priority, RevocationPriority)
	}
	q.Done(got)
	// The routine ones keep their order behind it.
	next, _, _ := q.GetWithPriority()
	if next.Name != "routine-0000" {
		t.Fatalf("then %s, want routine-0000", next.Name)
	}
}
