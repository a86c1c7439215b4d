package operator

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RevocationPriority is the work-queue priority of a Plugin whose
// PluginGrant was deleted. Routine reconciles have priority 0 (a change to
// the core's or proxy's Service enqueues every Plugin at it), and the initial
// list and unchanged resyncs handler.LowPriority, so with thousands of Plugins
// queued a revocation still runs next (issue 18): revoking is what must not
// wait.
const RevocationPriority = 100

// grantEvents enqueues the Plugin of the PluginGrant an event is for, like
// handler.EnqueueRequestForObject, and the Plugin of a deleted grant at
// RevocationPriority when the controller's queue is controller-runtime's
// priority queue (the default).
type grantEvents struct {
	handler.EnqueueRequestForObject
}

// Delete enqueues the revoked Plugin ahead of routine reconciles.
func (*grantEvents) Delete(_ context.Context, evt event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueRevocation(evt.Object, q)
}

// enqueueRevocation adds the Plugin named like grant to q, at
// RevocationPriority when q has priorities.
func enqueueRevocation(grant client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if grant == nil {
		return
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: grant.GetNamespace(), Name: grant.GetName()}}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(RevocationPriority)}, req)
		return
	}
	q.Add(req)
}
