package operator

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RevocationPriority is the Plugin queue's priority of a reconcile a grant's
// deletion or change asks for (OF-15): above every routine reconcile
// (priority 0, and controller-runtime's LowPriority for the initial list and
// resyncs), so a revocation never waits behind a backlog of thousands of
// Plugins (D-16). Among revocations the queue keeps arrival order.
const RevocationPriority = 100

// grantChanges maps events of a PluginGrant to the Plugin of the same name:
// a deletion, or a change of the grant's spec (its generation), at
// RevocationPriority; a creation, or a change of metadata or status only,
// at the queue's default.
func grantChanges() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(requestFor(e.Object))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				addRevocation(q, requestFor(e.ObjectNew))
				return
			}
			q.Add(requestFor(e.ObjectNew))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			addRevocation(q, requestFor(e.Object))
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(requestFor(e.Object))
		},
	}
}

// addRevocation queues r at RevocationPriority; a queue without priorities
// gets a plain Add.
func addRevocation(q workqueue.TypedRateLimitingInterface[reconcile.Request], r reconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(RevocationPriority)}, r)
		return
	}
	q.Add(r)
}

func requestFor(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
}
