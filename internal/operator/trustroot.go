package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/sigstore/sigstore-go/pkg/root"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// Reasons of the Events the operator records on the ConfigMap
// openfief-sigstore-root.
const (
	// EventTrustRootInvalid (Warning): the ConfigMap's files did not verify
	// against the Sigstore root in use, which stays; the note names the file
	// and the rule.
	EventTrustRootInvalid = "SigstoreRootInvalid"
	// EventTrustRootApplied (Normal): keyless signatures are now verified
	// with the ConfigMap's trusted_root.json; every Plugin is checked again.
	EventTrustRootApplied = "SigstoreRootApplied"
)

// trustRoots follows the admin's Sigstore trust root through the API (the
// ConfigMap openfief-sigstore-root in openfief, a copy of a TUF repository's
// files) and keeps the image checker verifying keyless signatures with it:
// each new content is verified offline against the root in use
// (cosign.TrustRoot.Update: signed through the TUF root-rotation chain,
// never older), and only content that verifies replaces it; then the image
// checker is rebuilt with the new root and every Plugin is reconciled again.
// Content that does not verify is refused with a Warning Event and the
// root in use stays. No ConfigMap, or an empty one, means the root the
// binary embeds. What is in use, and what was refused last, is published
// in openfief-sigstore-root-status (trustRootPublisher) for `openfief check`.
type trustRoots struct {
	// start is the root without a ConfigMap, and the start of the TUF chain
	// after a restart.
	start cosign.TrustRoot
	// rebuild makes the image checker verify with material(); set once
	// before the manager starts.
	rebuild  func() error
	recorder events.EventRecorder
	log      logr.Logger
	now      func() time.Time
	// changed wakes the status publisher after each apply.
	changed chan event.GenericEvent

	// inUse is the root the image checker is built with, read without mu.
	inUse atomic.Pointer[cosign.TrustRoot]

	mu sync.Mutex
	// refused is the content refused last, while it is still the
	// ConfigMap's; reported says its Event was recorded.
	refused  *plugins.TrustRootRefusal
	reported bool
}

// newTrustRoots reads the ConfigMap once through r (the API server: the
// manager has not started) and verifies it from start, so the first
// reconciles already use the admin's root. A read that fails is an error:
// the operator does not know which root to trust and refuses to start.
// Content that does not verify starts with start and is reported as the
// watch first delivers the ConfigMap.
func newTrustRoots(ctx context.Context, r client.Reader, start cosign.TrustRoot, recorder events.EventRecorder, log logr.Logger) (*trustRoots, error) {
	t := &trustRoots{start: start, recorder: recorder, log: log, now: time.Now, changed: make(chan event.GenericEvent, 1)}
	t.inUse.Store(&start)
	var cm corev1.ConfigMap
	err := r.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.TrustRootConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return t, nil
	case err != nil:
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", plugins.Namespace, plugins.TrustRootConfigMap, err)
	}
	next, refusal := t.verify(cm.Data)
	if refusal != nil {
		t.refused = refusal
		return t, nil
	}
	if next != nil {
		t.inUse.Store(next)
		log.Info("the admin's Sigstore root is in use", "configMap", plugins.TrustRootConfigMap, "sha256", next.Status.SHA256,
			"rootVersion", next.Status.RootVersion, "targetsVersion", next.Status.TargetsVersion)
	}
	return t, nil
}

// material is the trusted root the image checker verifies keyless
// signatures with.
func (t *trustRoots) material() root.TrustedMaterial { return t.inUse.Load().Material }

// status is what the publisher writes: the root in use and the refusal.
func (t *trustRoots) status() plugins.TrustRootStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.inUse.Load().Status
	if t.refused != nil {
		r := *t.refused
		s.Refused = &r
	}
	return s
}

// verify checks data against the root in use. It returns the root to
// switch to (nil: data is the content in use already, or none when that is
// the start) or why data is refused.
func (t *trustRoots) verify(data map[string]string) (*cosign.TrustRoot, *plugins.TrustRootRefusal) {
	current := t.inUse.Load()
	fp := plugins.TrustRootFingerprint(data)
	switch {
	case fp == "" && current.Status.Source == plugins.TrustRootEmbedded:
		return nil, nil
	case fp == "":
		start := t.start
		return &start, nil
	case fp == current.Status.ConfigMap:
		return nil, nil
	}
	files, err := plugins.ParseTrustRootFiles(data)
	if err != nil {
		return nil, refusalOf(fp, err)
	}
	next, err := current.Update(files, fp, t.now())
	if err != nil {
		return nil, refusalOf(fp, err)
	}
	return &next, nil
}

// refusalOf is the refusal of the content fp for err: every problem on one
// line (the parser reports each on a line of its own), made safe to show.
func refusalOf(fp string, err error) *plugins.TrustRootRefusal {
	return &plugins.TrustRootRefusal{ConfigMap: fp, Reason: plugins.SafeReason(strings.ReplaceAll(err.Error(), "\n", "; "), plugins.MaxTrustRootReason)}
}

// apply verifies what cm holds (nil: the ConfigMap is gone) and, when it
// verifies and differs from the root in use, switches the image checker to
// it; it reports whether the root changed. The same content again (a
// resync) changes nothing and reports a refusal once.
func (t *trustRoots) apply(cm *corev1.ConfigMap) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.wakePublisher()
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	if t.refused != nil && t.refused.ConfigMap == plugins.TrustRootFingerprint(data) {
		t.report(cm)
		return false
	}
	next, refusal := t.verify(data)
	if refusal == nil && next != nil {
		refusal = t.use(next)
	}
	if refusal != nil {
		t.refused, t.reported = refusal, false
		t.report(cm)
		return false
	}
	t.refused = nil
	return next != nil
}

// use makes next the root in use and rebuilds the image checker with it;
// if that fails, the root in use stays and the failure is the refusal.
func (t *trustRoots) use(next *cosign.TrustRoot) *plugins.TrustRootRefusal {
	previous := t.inUse.Swap(next)
	if t.rebuild != nil {
		if err := t.rebuild(); err != nil {
			t.inUse.Store(previous)
			if rerr := t.rebuild(); rerr != nil {
				t.log.Error(rerr, "rebuilding the image checker with the Sigstore root in use")
			}
			return refusalOf(next.Status.ConfigMap, fmt.Errorf("the image verifier does not accept it: %w", err))
		}
	}
	s := next.Status
	if s.Source == plugins.TrustRootEmbedded {
		t.log.Info("the admin's Sigstore root is gone; the embedded root is in use again; checking every plugin again",
			"configMap", plugins.TrustRootConfigMap, "sha256", s.SHA256)
		return nil
	}
	t.log.Info("the admin's Sigstore root changed; checking every plugin again", "configMap", plugins.TrustRootConfigMap,
		"sha256", s.SHA256, "rootVersion", s.RootVersion, "targetsVersion", s.TargetsVersion)
	return nil
}

// report records the refusal's Warning Event on cm, once per refused
// content, and logs it.
func (t *trustRoots) report(cm *corev1.ConfigMap) {
	if t.reported || t.refused == nil {
		return
	}
	t.reported = true
	inUse := t.inUse.Load().Status
	t.log.Info("the admin's Sigstore root did not verify; the root in use stays", "configMap", plugins.TrustRootConfigMap,
		"error", t.refused.Reason, "inUse", inUse.Source, "sha256", inUse.SHA256)
	if t.recorder != nil && cm != nil {
		t.recorder.Eventf(cm, nil, corev1.EventTypeWarning, EventTrustRootInvalid, actionTrust, "%s",
			truncateMessage("refused, the Sigstore root in use stays ("+describeRoot(inUse)+"): "+t.refused.Reason))
	}
}

// applied records the Normal Event of a root now in use.
func (t *trustRoots) applied(cm *corev1.ConfigMap) {
	if t.recorder == nil || cm == nil {
		return
	}
	s := t.inUse.Load().Status
	t.recorder.Eventf(cm, nil, corev1.EventTypeNormal, EventTrustRootApplied, actionTrust,
		"%s is in use; every plugin is checked again", describeRoot(s))
}

// describeRoot names a root for a person: where it came from and its digest.
func describeRoot(s plugins.TrustRootStatus) string {
	if s.Source == plugins.TrustRootEmbedded {
		return "the embedded root, trusted_root.json sha256 " + s.SHA256
	}
	return fmt.Sprintf("the root of ConfigMap %s, TUF root version %d, targets version %d, trusted_root.json sha256 %s",
		plugins.TrustRootConfigMap, s.RootVersion, s.TargetsVersion, s.SHA256)
}

// wakePublisher asks the status publisher to publish again; a wake-up
// already pending is enough.
func (t *trustRoots) wakePublisher() {
	select {
	case t.changed <- event.GenericEvent{}:
	default:
	}
}

// changes is the event handler of the ConfigMap: it applies each version
// and, when the root changed, records the Normal Event and queues every
// Plugin at RevocationPriority (a new root can refuse what the old one
// admitted).
func (t *trustRoots) changes(every func(context.Context) []reconcile.Request) handler.EventHandler {
	return configMapChanges(t.take, every)
}

// take applies cm and records the Normal Event when the root changed.
func (t *trustRoots) take(cm *corev1.ConfigMap) bool {
	if !t.apply(cm) {
		return false
	}
	t.applied(cm)
	return true
}
