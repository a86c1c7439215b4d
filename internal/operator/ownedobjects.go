package operator

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// The objects a plugin owns (BuildObjects: ServiceAccount, ConfigMap,
// Service, NetworkPolicy, Deployment) are watched as metadata only
// (ownedcache.go, OF-63): the watch says which object changed and at which
// resource version, never what it holds. What the reconciler needs to know
// of their content it learns from whole objects it read from the API server
// or got back from an apply, and remembers here, per object, with the
// resource version it saw: while the watch reports the same version, the
// object is as seen then. A version that moved (a hand edit, the
// Deployment controller's status, a deletion and a new object of the same
// name) sends the next pass to read the object whole again. So a
// steady-state pass reads nothing and writes nothing (OF-4), a restarted
// operator reads each object once, and the cache holds about 0.5 KB an
// object where whole objects held several.

// ownedObjects is what the operator knows of the objects plugins own: the
// metadata-only cache and, per object, what it last saw of it whole.
type ownedObjects struct {
	// cache holds the owned objects' metadata (newOwnedCache).
	cache client.Reader
	// live reads whole objects from the API server itself.
	live client.Reader

	mu   sync.Mutex
	seen map[ownedKey]*seenObject
}

// ownedKey names one owned object: its kind (a constant string) and name.
type ownedKey struct {
	kind string
	name string
}

// seenObject is what the operator saw of an owned object, whole, at one
// resource version.
type seenObject struct {
	resourceVersion string
	// holds is the digest of the desired object (desiredDigest) this one
	// held everything of; zero when it was not compared.
	holds [sha256.Size]byte
	// deployment is what a Deployment's readers need of it; nil for other
	// kinds.
	deployment *deploymentFacts
}

func newOwnedObjects(cache, live client.Reader) *ownedObjects {
	return &ownedObjects{cache: metadataOnly{cache}, live: live, seen: map[ownedKey]*seenObject{}}
}

// metadataOnly reads metadata from a cache and refuses any other read: a
// typed read would start an informer of whole objects, every plugin's.
type metadataOnly struct{ next client.Reader }

func (m metadataOnly) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
		return fmt.Errorf("the plugins' objects are cached as metadata only, not as %T", obj)
	}
	return m.next.Get(ctx, key, obj, opts...)
}

func (m metadataOnly) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*metav1.PartialObjectMetadataList); !ok {
		return fmt.Errorf("the plugins' objects are cached as metadata only, not as %T", list)
	}
	return m.next.List(ctx, list, opts...)
}

// keyOf is obj's key, the kind taken from its Go type (BuildObjects leaves
// TypeMeta to the scheme on some objects).
func keyOf(obj client.Object) ownedKey {
	var kind string
	switch obj.(type) {
	case *corev1.ServiceAccount:
		kind = "ServiceAccount"
	case *corev1.ConfigMap:
		kind = "ConfigMap"
	case *corev1.Service:
		kind = "Service"
	case *networkingv1.NetworkPolicy:
		kind = "NetworkPolicy"
	case *appsv1.Deployment:
		kind = "Deployment"
	default:
		kind = fmt.Sprintf("%T", obj)
	}
	return ownedKey{kind: kind, name: obj.GetName()}
}

// metadata returns the cache's resource version of obj's object; found is
// false when the cache holds none.
func (o *ownedObjects) metadata(ctx context.Context, gvk schema.GroupVersionKind, name string) (rv string, found bool, err error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	switch err := o.cache.Get(ctx, types.NamespacedName{Namespace: plugins.Namespace, Name: name}, m); {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return m.ResourceVersion, true, nil
}

// lookup returns what was seen of key at resource version rv, nil when
// nothing was seen at that version.
func (o *ownedObjects) lookup(key ownedKey, rv string) *seenObject {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen[key]
	if s == nil || s.resourceVersion != rv {
		return nil
	}
	return s
}

// remember records what was seen of obj, whole, at its resource version:
// that it held the desired object of digest want (zero when not compared),
// and, for a Deployment, its facts.
func (o *ownedObjects) remember(obj client.Object, want [sha256.Size]byte) *seenObject {
	s := &seenObject{resourceVersion: obj.GetResourceVersion(), holds: want}
	if d, ok := obj.(*appsv1.Deployment); ok {
		s.deployment = factsOf(d)
	}
	key := keyOf(obj)
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev := o.seen[key]; prev != nil && prev.resourceVersion == s.resourceVersion && s.holds == ([sha256.Size]byte{}) {
		s.holds = prev.holds // the same version, not compared again
	}
	o.seen[key] = s
	return s
}

// forget drops what was seen of obj's object (deleted, or its plugin gone).
func (o *ownedObjects) forget(obj client.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, keyOf(obj))
}

// forgetPlugin drops what was seen of every object plugin name owns.
func (o *ownedObjects) forgetPlugin(name string) {
	meta := metav1.ObjectMeta{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(name)}
	for _, obj := range ownedPrototypes(meta) {
		o.forget(obj)
	}
}

// readWhole reads obj's object whole from the API server into obj and
// remembers it, compared with nothing; found is false when there is none.
func (o *ownedObjects) readWhole(ctx context.Context, obj client.Object) (found bool, err error) {
	switch err := o.live.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
	case apierrors.IsNotFound(err):
		o.forget(obj)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s: %w", describe(obj), err)
	}
	return true, nil
}

// applyIfChanged server-side applies desired unless its object already
// holds everything desired sets (OF-4: a steady-state reconcile sends no
// write). It asks, in turn:
//   - the cache's resource version of the object, and what was seen of it
//     at that version: held then for this very desired object, nothing to
//     do;
//   - otherwise the object whole, read from the API server and compared
//     (holds, on its compacted copy, specdigest.go);
//   - with no object, or one that does not hold desired: an apply, whose
//     answer is remembered.
//
// A hand edit to a field the operator sets moves the resource version and
// makes the object differ, so the next pass applies again and the API
// server restores the field; fields another manager added are left alone
// by server-side apply and do not count as differences.
func (o *ownedObjects) applyIfChanged(ctx context.Context, c client.Client, desired client.Object) (bool, error) {
	want, err := desiredDigest(desired)
	if err != nil {
		return false, fmt.Errorf("digest %s: %w", describe(desired), err)
	}
	gvk, err := c.GroupVersionKindFor(desired)
	if err != nil {
		return false, err
	}
	key := keyOf(desired)
	rv, cached, err := o.metadata(ctx, gvk, desired.GetName())
	if err != nil {
		return false, fmt.Errorf("read %s: %w", describe(desired), err)
	}
	known := false // what the object holds now is known: as seen
	if cached {
		if s := o.lookup(key, rv); s != nil {
			if s.holds == want {
				return false, nil
			}
			// Seen at this very version, for another desired object (a
			// grant changed, a revocation): applied straight, unread.
			known = s.holds != [sha256.Size]byte{}
		}
	}
	o.mu.Lock()
	_, seenBefore := o.seen[key]
	o.mu.Unlock()
	// The cache may be behind an apply of the pass before: a plugin the
	// operator applied before is read before it is applied again.
	if !known && (cached || seenBefore) {
		current := desired.DeepCopyObject().(client.Object)
		found, err := o.readWhole(ctx, current)
		if err != nil {
			return false, err
		}
		if found {
			compacted := current.DeepCopyObject().(client.Object)
			compactOwned(compacted)
			if holds(compacted, desired) {
				o.remember(current, want)
				return false, nil
			}
			o.remember(current, [sha256.Size]byte{})
		}
	}
	applied, err := apply(ctx, c, desired)
	if err != nil {
		return false, err
	}
	compacted := applied.DeepCopyObject().(client.Object)
	compactOwned(compacted)
	if holds(compacted, desired) {
		o.remember(applied, want)
	} else {
		// Someone else's admission changed what was applied: the next pass
		// compares again.
		o.remember(applied, [sha256.Size]byte{})
	}
	return true, nil
}

// deleteIfExists deletes obj's object unless the cache says it is already
// gone, so a torn-down plugin's steady state sends no request.
func (o *ownedObjects) deleteIfExists(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	_, cached, err := o.metadata(ctx, gvk, obj.GetName())
	if err != nil {
		return false, fmt.Errorf("read %s: %w", describe(obj), err)
	}
	o.forget(obj)
	if !cached {
		return false, nil
	}
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete %s: %w", describe(obj), err)
	}
	return true, nil
}

// deployment returns the facts of plugin name's Deployment: remembered,
// when the cache's version is the one seen; read whole from the API server
// otherwise. live reports that they were read from the API server just now
// (the cache holds no Deployment, or another version than the one seen);
// nil facts when there is no Deployment.
func (o *ownedObjects) deployment(ctx context.Context, name string) (f *deploymentFacts, live bool, err error) {
	d := pluginDeployment(name)
	rv, cached, err := o.metadata(ctx, appsv1.SchemeGroupVersion.WithKind("Deployment"), d.Name)
	if err != nil {
		return nil, false, fmt.Errorf("read Deployment %s: %w", d.Name, err)
	}
	if cached {
		if s := o.lookup(keyOf(d), rv); s != nil && s.deployment != nil {
			return s.deployment, false, nil
		}
	}
	found, err := o.readWhole(ctx, d)
	if err != nil || !found {
		return nil, true, err
	}
	return o.remember(d, [sha256.Size]byte{}).deployment, true, nil
}

// lastSeenDeployment returns the facts of plugin name's Deployment as the
// operator saw it last, whole (read, or answered to an apply or a patch),
// whatever the cache says now; nil when it saw none.
func (o *ownedObjects) lastSeenDeployment(name string) *deploymentFacts {
	key := keyOf(pluginDeployment(name))
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.seen[key]; s != nil {
		return s.deployment
	}
	return nil
}

// wholeDeployment reads plugin name's Deployment whole from the API server
// and remembers it; nil when there is none.
func (o *ownedObjects) wholeDeployment(ctx context.Context, name string) (*appsv1.Deployment, error) {
	d := pluginDeployment(name)
	found, err := o.readWhole(ctx, d)
	if err != nil || !found {
		return nil, err
	}
	o.remember(d, [sha256.Size]byte{})
	return d, nil
}

// desiredDigest is the SHA-256 of desired's JSON form, which names all it
// sets: the same desired object, the same digest.
func desiredDigest(desired client.Object) ([sha256.Size]byte, error) {
	raw, err := json.Marshal(desired)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(raw), nil
}

// pluginDeployment is an empty Deployment named as plugin name's
// (BuildObjects), to read, patch or key it by.
func pluginDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(name)}}
}
