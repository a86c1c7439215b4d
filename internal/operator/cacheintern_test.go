package operator

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"

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
