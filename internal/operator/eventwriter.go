package operator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// eventWriter records the operator's Events (events.k8s.io/v1) by creating
// each one from a queue, and keeps nothing once it is written. The
// manager's recorder (client-go's broadcaster) keeps a copy of every Event
// it wrote for 6 to 12 minutes, to turn a repeat into a series: about 2 KB a
// plugin in the minutes after 10,000 Plugins converge, two Events each.
// The operator records an Event only when what it reports changes
// (pluginEvents), so a repeat is rare and stands as an Event of its own.
//
// Like the broadcaster it never blocks the caller: an Event that finds the
// queue full is dropped and logged. A write the API server refuses (an API
// status such as Invalid or Forbidden) is not tried again; one that did
// not reach it is, up to eventTries times, eventRetryDelay apart.
type eventWriter struct {
	client   client.Client
	scheme   *runtime.Scheme
	instance string
	queue    chan *eventsv1.Event
	log      logr.Logger
	// retryDelay is eventRetryDelay unless a test sets it.
	retryDelay time.Duration
}

const (
	// eventQueue is how many Events wait to be written at most: a cold
	// start of thousands of Plugins records two each faster than the
	// client's rate limit for Events (50 a second by default) writes them.
	// client-go's broadcaster let them wait in a goroutine each, unbounded;
	// here about 1 KB each, 4 MB at most.
	eventQueue = 4096
	// eventWorkers write Events at once; the client's rate limit for the
	// kind bounds them anyway.
	eventWorkers = 4
	// eventTries and eventRetryDelay are client-go's broadcaster's.
	eventTries      = 12
	eventRetryDelay = 10 * time.Second
)

var _ events.EventRecorder = (*eventWriter)(nil)

// newEventWriter returns an eventWriter writing through c, whose Events name
// EventReportingController and, as reportingInstance, it followed by "-"
// and the host name (as client-go's recorder names them). It writes nothing
// until Start.
func newEventWriter(c client.Client, scheme *runtime.Scheme, log logr.Logger) *eventWriter {
	host, _ := os.Hostname()
	return &eventWriter{
		client: c, scheme: scheme, instance: EventReportingController + "-" + host,
		queue: make(chan *eventsv1.Event, eventQueue), log: log, retryDelay: eventRetryDelay,
	}
}

// Eventf queues an Event about regarding (and related, when not nil), as
// events.EventRecorder describes.
func (w *eventWriter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	now := time.Now()
	ref, err := reference.GetReference(w.scheme, regarding)
	if err != nil {
		w.log.Error(err, "no reference to the object of an Event; not recorded", "reason", reason)
		return
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		w.log.Error(nil, "Event of an unknown type; not recorded", "type", eventtype, "reason", reason)
		return
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(w.scheme, related); err != nil {
			rel = nil // as client-go: the Event goes without it
		}
	}
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: EventReportingController,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                fmt.Sprintf(note, args...),
		Type:                eventtype,
	}
	select {
	case w.queue <- e:
	default:
		w.log.Info("Event queue full; Event dropped", "reason", reason, "regarding", ref.Name)
	}
}

// Start writes queued Events with eventWorkers until ctx ends; what is
// still queued then is dropped.
func (w *eventWriter) Start(ctx context.Context) error {
	done := make(chan struct{})
	for range eventWorkers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-w.queue:
					w.write(ctx, e)
				}
			}
		}()
	}
	for range eventWorkers {
		<-done
	}
	return nil
}

// NeedLeaderElection is false: a standby's Events (its view of the owner's
// signers and the Sigstore root) are written too, as the broadcaster did.
func (w *eventWriter) NeedLeaderElection() bool { return false }

// write creates e, again after a failure that is no answer of the API
// server's, up to eventTries times.
func (w *eventWriter) write(ctx context.Context, e *eventsv1.Event) {
	for try := 1; ; try++ {
		err := w.client.Create(ctx, e.DeepCopy())
		var status apierrors.APIStatus
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return
		case errors.As(err, &status):
			w.log.Error(err, "Event refused", "reason", e.Reason, "regarding", e.Regarding.Name)
			return
		case try >= eventTries:
			w.log.Error(err, "Event not written; giving up", "reason", e.Reason, "regarding", e.Regarding.Name)
			return
		}
		// Jittered by a quarter, so replicas that lost the API server
		// together do not come back together.
		delay := w.retryDelay + time.Duration(rand.Int64N(int64(w.retryDelay)/4+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}
