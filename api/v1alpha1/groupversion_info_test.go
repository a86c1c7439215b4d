package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// TestAddToScheme: the four kinds are registered under openfief.io/v1alpha1,
// with the meta types a client needs to list and watch them.
func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for kind, obj := range map[string]runtime.Object{
		"Plugin":          &Plugin{},
		"PluginList":      &PluginList{},
		"PluginGrant":     &PluginGrant{},
		"PluginGrantList": &PluginGrantList{},
	} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		if len(gvks) != 1 || gvks[0] != GroupVersion.WithKind(kind) {
			t.Errorf("%s registered as %v, want %v", kind, gvks, GroupVersion.WithKind(kind))
		}
	}
	for _, kind := range []string{"ListOptions", "GetOptions", "DeleteOptions", "WatchEvent"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("%s is not registered under %v", kind, GroupVersion)
		}
	}
	if _, err := s.New(GroupVersion.WithKind("Plugin")); err != nil {
		t.Errorf("New(Plugin): %v", err)
	}
}
