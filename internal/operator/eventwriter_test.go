package operator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// writerWith returns an eventWriter over a client whose creates fail with
// fail (the first `failures` of them; every one when failures < 0), and a
// count of the creates tried.
func writerWith(t *testing.T, fail error, failures int64) (*eventWriter, client.Client, *atomic.Int64) {
	t.Helper()
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	var tries atomic.Int64
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n := tries.Add(1)
			if fail != nil && (failures < 0 || n <= failures) {
				return fail
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	w := newEventWriter(c, s, logr.Discard())
	w.retryDelay = time.Millisecond
	return w, c, &tries
}

// written waits until c holds n Events and returns them.
func written(t *testing.T, c client.Client, n int) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	testutil.Eventually(t, 10*time.Second, "Events written", func() (bool, string) {
		if err := c.List(context.Background(), &list); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == n, ""
	})
	return list.Items
}

// TestEventWriterWritesWhatTheRecorderWould: an Event as client-go's
// recorder makes it (regarding, reason, action, note, type, the reporting
// controller and instance, no series), written once the writer runs; one
// that did not reach the API server is tried again.
func TestEventWriterWritesWhatTheRecorderWould(t *testing.T) {
	w, c, tries := writerWith(t, errors.New("connection refused"), 2)
	p := testutil.MakePlugin("fx", testutil.Image("fx")).Obj()
	p.UID = "uid-fx"
	w.Eventf(p, nil, corev1.EventTypeNormal, EventImageVerified, "Verify", "%s by %s", "SignedByTrustedSigner", "owner")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Start(ctx) }()
	e := written(t, c, 1)[0]
	if e.Regarding.Kind != "Plugin" || e.Regarding.Name != "fx" || e.Regarding.UID != "uid-fx" || e.Namespace != p.Namespace ||
		e.Reason != EventImageVerified || e.Action != "Verify" || e.Note != "SignedByTrustedSigner by owner" || e.Type != corev1.EventTypeNormal ||
		e.ReportingController != EventReportingController || e.ReportingInstance != w.instance || e.Series != nil || e.EventTime.IsZero() {
		t.Errorf("Event %+v", e)
	}
	if got := tries.Load(); got != 3 {
		t.Errorf("%d creates, want 3 (two failed to reach the API server)", got)
	}
}

// TestEventWriterDoesNotRetryARefusal: an Event the API server refuses is
// given up at once, and the next one is written.
func TestEventWriterDoesNotRetryARefusal(t *testing.T) {
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "x", errors.New("no"))
	w, c, tries := writerWith(t, refused, 1)
	p := testutil.MakePlugin("fx", testutil.Image("fx")).Obj()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Start(ctx) }()
	w.Eventf(p, nil, corev1.EventTypeWarning, EventImageRefused, "Verify", "first")
	testutil.Eventually(t, 10*time.Second, "the refused create", func() (bool, string) { return tries.Load() == 1, "" })
	w.Eventf(p, nil, corev1.EventTypeNormal, EventImageVerified, "Verify", "second")
	if e := written(t, c, 1)[0]; e.Note != "second" {
		t.Errorf("written %q, want only the second", e.Note)
	}
	time.Sleep(50 * time.Millisecond)
	if got := tries.Load(); got != 2 {
		t.Errorf("%d creates, want 2: a refusal is not retried", got)
	}
}

// TestEventWriterDropsWhenFull: Eventf never blocks; past eventQueue
// waiting Events, and for an unknown type, nothing is queued.
func TestEventWriterDropsWhenFull(t *testing.T) {
	w, _, _ := writerWith(t, nil, 0)
	p := testutil.MakePlugin("fx", testutil.Image("fx")).Obj()
	for range eventQueue + 10 {
		w.Eventf(p, nil, corev1.EventTypeNormal, EventImageVerified, "Verify", "n")
	}
	if len(w.queue) != eventQueue {
		t.Errorf("%d queued, want %d", len(w.queue), eventQueue)
	}
	w2, _, _ := writerWith(t, nil, 0)
	w2.Eventf(p, nil, "Odd", EventImageVerified, "Verify", "n")
	if len(w2.queue) != 0 {
		t.Errorf("an Event of an unknown type was queued")
	}
}
