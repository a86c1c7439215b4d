package operator

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
// plugin's objects repeat: its namespace, label keys and values (the
// Deployment's selector and pod template labels, and the Service's
// selector, take the object's own labels' map when equal), and its owner
// references' API version and kind. Nothing cached is ever modified (the
// cache hands out copies), so sharing is safe.
func internCached(obj client.Object) {
	obj.SetNamespace(intern(obj.GetNamespace()))
	labels := internLabels(obj.GetLabels())
	obj.SetLabels(labels)
	same := func(m map[string]string) map[string]string {
		if maps.Equal(m, labels) && m != nil {
			return labels
		}
		return internLabels(m)
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
}
