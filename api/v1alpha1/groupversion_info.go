// Package v1alpha1 holds the openfief.io/v1alpha1 API: Plugin, the vendor's
// request, and PluginGrant, the owner's approval (D-13, D-16, D-55). The Go
// types are the source of truth; controller-gen generates the CRDs, the
// deepcopy code and the operator's Role from the markers here.
//
// +kubebuilder:object:generate=true
// +groupName=openfief.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "openfief.io", Version: "v1alpha1"}

	// SchemeBuilder registers these types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
