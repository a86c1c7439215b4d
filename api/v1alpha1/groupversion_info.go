// Package v1alpha1 holds the openfief.io/v1alpha1 API: Plugin, the vendor's
// request, and PluginGrant, the owner's approval (D-13, D-16, D-55). The Go
// types are the source of truth; controller-gen generates the CRDs, the
// deepcopy code and the operator's Role from the markers here.
//
// +kubebuilder:object:generate=true
// +groupName=openfief.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "openfief.io", Version: "v1alpha1"}

	// SchemeBuilder registers these types with a runtime.Scheme. It is
	// apimachinery's, so the API package links nothing but apimachinery.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers Plugin, PluginGrant and their lists under
// GroupVersion, with the meta types (ListOptions and the like) beside them.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Plugin{}, &PluginList{}, &PluginGrant{}, &PluginGrantList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
