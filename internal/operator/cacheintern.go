package operator

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// internedStrings are the label keys and values every plugin's objects
// carry (PodLabels) and the API version and kind of their owner reference.
// Decoding gives each object its own copy of each; the cache keeps the
// constants instead (OF-16), about 1.5 KB a plugin.
var internedStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		plugins.LabelName, plugins.ValuePluginName,
		plugins.LabelComponent, plugins.ValueComponentPlugin,
		plugins.LabelManagedBy, plugins.ValueManagedBy,
		plugins.LabelPluginName, plugins.Namespace, "Plugin",
		// The managed fields entry the cache keeps (compactForCache).
		FieldManager, string(metav1.ManagedFieldsOperationApply), "FieldsV1", "v1", "apps/v1",
	} {
		m[s] = s
	}
	gv := v1alpha1.GroupVersion.String() // ownerRef's
	m[gv] = gv
	return m
}()

// intern returns the constant equal to s, or s.
func intern(s string) string {
	if c, ok := internedStrings[s]; ok {
		return c
	}
	return s
}

// sharedLabels holds one map per set of labels the cache has seen, so
// that objects with equal labels share one map: every object a plugin owns
// carries the same PodLabels, five maps a plugin without it. It is keyed by
// a seeded hash of the labels and a hit is compared whole, so a collision
// only costs the sharing. It holds at most maxSharedLabels sets and is
// emptied when full (sharing is only a saving: an object keeps the map it
// was given), which bounds what it keeps alive after the objects are gone.
var sharedLabels = labelSets{seed: maphash.MakeSeed()}

// maxSharedLabels bounds sharedLabels: room for the label sets of
// several times 10,000 plugins.
const maxSharedLabels = 1 << 15

type labelSets struct {
	seed maphash.Seed
	// max is how many sets it holds at most; maxSharedLabels when 0.
	max  int
	mu   sync.Mutex
	sets map[uint64]map[string]string
}

// share returns a map equal to labels whose keys and values are the
// constants where there is one (internLabels), the same map for every equal
// set of labels while it is held; nil for nil.
func (s *labelSets) share(labels map[string]string) map[string]string {
	if labels == nil {
		return nil
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(labels[k])
		h.WriteByte(0)
	}
	sum := h.Sum64()
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.sets[sum]; ok && maps.Equal(m, labels) {
		return m
	}
	limit := s.max
	if limit <= 0 {
		limit = maxSharedLabels
	}
	if s.sets == nil || len(s.sets) >= limit {
		s.sets = map[uint64]map[string]string{}
	}
	m := internLabels(labels)
	s.sets[sum] = m
	return m
}

// internLabels returns a copy of labels whose keys and values are the
// constants where there is one; nil for nil.
func internLabels(labels map[string]string) map[string]string {
	if labels == nil {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[intern(k)] = intern(v)
	}
	return out
}

// internCached lets obj, about to enter the cache, share the strings every
// plugin's objects repeat: its namespace, label keys and values, its labels'
// map itself with every cached object of equal labels (sharedLabels: a
// plugin's five objects hold one), the Deployment's selector and pod
// template labels and the Service's selector likewise, its owner
// references' API version and kind, and the strings of the managed fields
// entry the cache keeps. Nothing cached is ever modified (the cache hands
// out copies), so sharing is safe.
func internCached(obj client.Object) {
	obj.SetNamespace(intern(obj.GetNamespace()))
	labels := sharedLabels.share(obj.GetLabels())
	obj.SetLabels(labels)
	same := func(m map[string]string) map[string]string {
		if maps.Equal(m, labels) && m != nil {
			return labels
		}
		return sharedLabels.share(m)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Spec.Selector != nil {
			o.Spec.Selector.MatchLabels = same(o.Spec.Selector.MatchLabels)
		}
		o.Spec.Template.Labels = same(o.Spec.Template.Labels)
	case *corev1.Service:
		o.Spec.Selector = same(o.Spec.Selector)
	}
	refs := obj.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion = intern(refs[i].APIVersion)
		refs[i].Kind = intern(refs[i].Kind)
	}
	fields := obj.GetManagedFields()
	for i := range fields {
		fields[i].Manager = intern(fields[i].Manager)
		fields[i].Operation = metav1.ManagedFieldsOperationType(intern(string(fields[i].Operation)))
		fields[i].APIVersion = intern(fields[i].APIVersion)
		fields[i].FieldsType = intern(fields[i].FieldsType)
	}
}
