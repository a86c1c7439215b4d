package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// Reasons of the Events the operator records on the ConfigMap
// openfief-trusted-signers (OF-31).
const (
	// EventTrustedSignersInvalid (Warning): the ConfigMap's signers.json is
	// not valid, so no owner signer is trusted until it is; the note names
	// the field and the rule it breaks.
	EventTrustedSignersInvalid = "TrustedSignersInvalid"
	// EventTrustedSignersApplied (Normal): the owner's signers in the
	// ConfigMap now decide which images run; every Plugin is checked again.
	EventTrustedSignersApplied = "TrustedSignersApplied"
)

// actionTrust is the action of the signers' Events.
const actionTrust = "Trust"

// ownerSigners follows the owner's signers through the API (the ConfigMap
// openfief-trusted-signers, key signers.json, in openfief) and keeps the
// image checker's policy in step (OF-31): each change builds the whole
// policy again (OpenFief's CI, the embedded catalog, the new owner signers)
// and swaps it into the PolicyVerifier in one step, then every Plugin is
// reconciled again against it. An invalid signers.json, a missing key or
// no ConfigMap at all trusts no owner signer: never part of a file.
type ownerSigners struct {
	verifier *trust.PolicyVerifier
	// newImages builds the registry reader of a policy's keys.
	newImages func(plugins.TrustPolicy) (cosign.ImageVerifier, error)
	// noOwner is the policy without owner signers and its reader, what
	// any invalid input falls back on.
	noOwner       plugins.TrustPolicy
	noOwnerImages cosign.ImageVerifier
	recorder      events.EventRecorder
	log           logr.Logger

	mu sync.Mutex
	// applied fingerprints the input the verifier's policy was built from
	// ("" before any, so the first event applies whatever it carries).
	applied string
	// trusted are the identities of the owner signers the verifier trusts.
	trusted map[plugins.SignerIdentity]bool
	// policy is the policy the verifier holds, which rebuild reads again.
	policy plugins.TrustPolicy
}

// newOwnerSigners reads the ConfigMap once through r (the API server, not a
// cache: the manager has not started) and builds the verifier from it, so
// the first reconciles already check with the owner's signers. A read that
// fails is an error: the operator does not know whom to trust and refuses
// to start. Content that is not valid starts with no owner signer and is
// reported as the watch first delivers the ConfigMap.
func newOwnerSigners(ctx context.Context, r client.Reader, newImages func(plugins.TrustPolicy) (cosign.ImageVerifier, error),
	recorder events.EventRecorder, log logr.Logger) (*ownerSigners, error) {
	noOwner, err := trust.NewPolicy(nil)
	if err != nil {
		return nil, err
	}
	noOwnerImages, err := newImages(noOwner)
	if err != nil {
		return nil, err
	}
	s := &ownerSigners{newImages: newImages, noOwner: noOwner, noOwnerImages: noOwnerImages, recorder: recorder, log: log}
	var cm corev1.ConfigMap
	err = r.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.OwnerSignersConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		s.verifier = trust.NewPolicyVerifier(noOwnerImages, noOwner)
		s.applied, s.trusted, s.policy = fingerprint(nil), map[plugins.SignerIdentity]bool{}, noOwner
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", plugins.Namespace, plugins.OwnerSignersConfigMap, err)
	}
	b := s.build(&cm)
	s.verifier = trust.NewPolicyVerifier(b.images, b.policy)
	s.trusted, s.policy = b.identities, b.policy
	if b.err == nil {
		s.applied = b.fingerprint
	}
	return s, nil
}

// built is a policy made from one version of the ConfigMap.
type built struct {
	policy      plugins.TrustPolicy
	images      cosign.ImageVerifier
	fingerprint string
	owners      int
	identities  map[plugins.SignerIdentity]bool
	// err says why the content was not taken (no owner signer is trusted).
	err error
}

// build makes the policy cm asks for; cm nil means there is no ConfigMap.
func (s *ownerSigners) build(cm *corev1.ConfigMap) built {
	var raw []byte
	if cm != nil {
		if v, ok := cm.Data[plugins.OwnerSignersKey]; ok {
			raw = []byte(v)
		}
	}
	fb := built{policy: s.noOwner, images: s.noOwnerImages, fingerprint: fingerprint(raw), identities: map[plugins.SignerIdentity]bool{}}
	if len(raw) == 0 {
		return fb
	}
	owners, err := plugins.ParseOwnerSigners(raw)
	if err != nil {
		fb.err = err
		return fb
	}
	policy, err := trust.NewPolicy(raw)
	if err != nil {
		fb.err = err
		return fb
	}
	images, err := s.newImages(policy)
	if err != nil {
		fb.err = err
		return fb
	}
	ids := map[plugins.SignerIdentity]bool{}
	for _, o := range owners {
		ids[o.Identity] = true
	}
	return built{policy: policy, images: images, fingerprint: fb.fingerprint, owners: len(owners), identities: ids}
}

// fingerprint names one signers.json content; no content, or none at all,
// is "none".
func fingerprint(raw []byte) string {
	if len(raw) == 0 {
		return "none"
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// apply makes the verifier trust what cm says (nil: the ConfigMap is gone)
// and reports whether that changed anything. The same content again (a
// resync, the watch's first list) changes nothing.
func (s *ownerSigners) apply(cm *corev1.ConfigMap) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.build(cm)
	if b.fingerprint == s.applied && b.err == nil {
		return false
	}
	narrower := true
	for id := range b.identities {
		narrower = narrower && s.trusted[id]
	}
	if narrower {
		s.verifier.Narrow(b.images, b.policy)
	} else {
		s.verifier.Replace(b.images, b.policy)
	}
	s.applied, s.trusted, s.policy = b.fingerprint, b.identities, b.policy
	if b.err != nil {
		// Not remembered as applied: the same invalid content is reported
		// again when the watch delivers it again, and anything else applies.
		s.applied = ""
		s.log.Info("the owner's trusted signers are invalid; no owner signer is trusted until they are valid again",
			"configMap", plugins.OwnerSignersConfigMap, "error", b.err.Error())
		if s.recorder != nil {
			s.recorder.Eventf(cm, nil, corev1.EventTypeWarning, EventTrustedSignersInvalid, actionTrust,
				"%s", truncateMessage(plugins.OwnerSignersKey+" is invalid, so no owner signer is trusted until it is valid again; "+
					"images signed only by owner signers are refused: "+b.err.Error()))
		}
		return true
	}
	if cm == nil {
		s.log.Info("the owner's trusted signers are gone; no owner signer is trusted", "configMap", plugins.OwnerSignersConfigMap)
		return true
	}
	s.log.Info("the owner's trusted signers changed; checking every plugin again", "configMap", plugins.OwnerSignersConfigMap, "ownerSigners", b.owners)
	if s.recorder != nil {
		s.recorder.Eventf(cm, nil, corev1.EventTypeNormal, EventTrustedSignersApplied, actionTrust,
			"%d owner signer(s) trusted; every plugin is checked again", b.owners)
	}
	return true
}

// rebuild makes the registry readers of the policy in use and of the
// fallback without owner signers again, as newImages makes them now (with
// the Sigstore root in use, trustRoots), and swaps them in with an empty
// cache: what the old root verified is verified again.
func (s *ownerSigners) rebuild() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	noOwnerImages, err := s.newImages(s.noOwner)
	if err != nil {
		return err
	}
	images, err := s.newImages(s.policy)
	if err != nil {
		return err
	}
	s.noOwnerImages = noOwnerImages
	s.verifier.Replace(images, s.policy)
	return nil
}

// changes is the event handler of the signers' ConfigMap: it applies each
// version and, when that changed the policy, queues every Plugin that
// every lists at RevocationPriority, so a removed signer stops its images
// before any routine reconcile runs.
func (s *ownerSigners) changes(every func(context.Context) []reconcile.Request) handler.EventHandler {
	return configMapChanges(s.apply, every)
}

// configMapChanges is the event handler of a ConfigMap the operator follows
// (the owner's signers, the Sigstore root): apply takes each version (nil
// when it is deleted) and reports whether that changed what images are
// checked against; if so, every Plugin that every lists is queued at
// RevocationPriority.
func configMapChanges(apply func(*corev1.ConfigMap) bool, every func(context.Context) []reconcile.Request) handler.EventHandler {
	queue := func(ctx context.Context, cm *corev1.ConfigMap, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if !apply(cm) {
			return
		}
		for _, r := range every(ctx) {
			addRevocation(q, r)
		}
	}
	asConfigMap := func(o client.Object) *corev1.ConfigMap {
		cm, _ := o.(*corev1.ConfigMap)
		return cm
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, asConfigMap(e.Object), q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, asConfigMap(e.ObjectNew), q)
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, nil, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, asConfigMap(e.Object), q)
		},
	}
}
