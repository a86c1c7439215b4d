package operator

import (
	"hash/maphash"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestInternCached: the cache's copy of a plugin's Deployment means the same
// after internCached, its repeated strings are the package's constants and
// its selector and pod template labels are its own labels' map.
func TestInternCached(t *testing.T) {
	p := testutil.MakePlugin("intern", testutil.Image("intern-1")).Obj()
	objs := BuildObjects(p, p.Spec.Image, nil, plugins.Workload{}, Cluster{})
	// Decoding gives every string its own copy: make them so.
	d := objs.Deployment.DeepCopy()
	copyStrings := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[strings.Clone(k)] = strings.Clone(v)
		}
		return out
	}
	d.Labels = copyStrings(d.Labels)
	d.Spec.Selector.MatchLabels = copyStrings(d.Spec.Selector.MatchLabels)
	d.Spec.Template.Labels = copyStrings(d.Spec.Template.Labels)
	d.Namespace = strings.Clone(d.Namespace)
	d.OwnerReferences[0].APIVersion = strings.Clone(d.OwnerReferences[0].APIVersion)
	before := d.DeepCopy()

	internCached(d)
	if !equality.Semantic.DeepEqual(before, d) {
		t.Fatalf("internCached changed the Deployment:\n%s\n%s", describeJSON(before), describeJSON(d))
	}
	sameData := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for k, v := range d.Labels {
		if !sameData(k, internedStrings[k]) {
			t.Errorf("label key %q is not the constant", k)
		}
		if c, ok := internedStrings[v]; ok && !sameData(v, c) {
			t.Errorf("label value %q is not the constant", v)
		}
	}
	if !sameData(d.Namespace, plugins.Namespace) || !sameData(d.OwnerReferences[0].APIVersion, internedStrings[d.OwnerReferences[0].APIVersion]) {
		t.Error("namespace or owner API version is not the constant")
	}
	mapOf := func(m map[string]string) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }
	if mapOf(d.Spec.Selector.MatchLabels) != mapOf(d.Labels) || mapOf(d.Spec.Template.Labels) != mapOf(d.Labels) {
		t.Error("selector or pod template labels are not the object's labels' map")
	}
	// A selector that differs keeps its own map.
	other := before.DeepCopy()
	other.Spec.Selector.MatchLabels["extra"] = "x"
	internCached(other)
	if mapOf(other.Spec.Selector.MatchLabels) == mapOf(other.Labels) || other.Spec.Selector.MatchLabels["extra"] != "x" {
		t.Error("a different selector was replaced by the labels")
	}
}

// TestSharedLabels: the cached copies of a plugin's objects hold one labels
// map between them, equal to what was decoded; other labels get a map of
// their own; and the set held is emptied once full, after which new
// objects still get labels equal to theirs.
func TestSharedLabels(t *testing.T) {
	mapOf := func(m map[string]string) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }
	p := testutil.MakePlugin("shared", testutil.Image("shared-1")).Obj()
	objs := BuildObjects(p, p.Spec.Image, nil, plugins.Workload{}, Cluster{})
	var first map[string]string
	for i, obj := range objs.List() {
		c := obj.DeepCopyObject().(client.Object)
		want := maps.Clone(c.GetLabels())
		internCached(c)
		if !maps.Equal(c.GetLabels(), want) {
			t.Fatalf("%s: labels %v, want %v", describe(c), c.GetLabels(), want)
		}
		if i == 0 {
			first = c.GetLabels()
		} else if mapOf(c.GetLabels()) != mapOf(first) {
			t.Errorf("%s does not share the plugin's labels map", describe(c))
		}
	}
	other := BuildObjects(testutil.MakePlugin("other", testutil.Image("other-1")).Obj(), p.Spec.Image, nil, plugins.Workload{}, Cluster{}).ServiceAccount
	internCached(other)
	if mapOf(other.Labels) == mapOf(first) || other.Labels[plugins.LabelPluginName] != "other" {
		t.Errorf("another plugin's labels %v share the map of %v", other.Labels, first)
	}
	if got := sharedLabels.share(nil); got != nil {
		t.Errorf("nil labels shared as %v", got)
	}

	small := labelSets{seed: maphash.MakeSeed(), max: 2}
	a := small.share(map[string]string{"a": "1"})
	small.share(map[string]string{"b": "1"})
	if got := small.share(map[string]string{"a": "1"}); mapOf(got) != mapOf(a) {
		t.Error("a held set was not shared")
	}
	c := small.share(map[string]string{"c": "1"}) // full: emptied first
	if len(small.sets) != 1 || c["c"] != "1" || len(c) != 1 {
		t.Errorf("after the set was full: %d held, %v", len(small.sets), c)
	}
	if got := small.share(map[string]string{"a": "1"}); mapOf(got) == mapOf(a) || got["a"] != "1" {
		t.Errorf("a set dropped with the others is still shared, or wrong: %v", got)
	}
}
