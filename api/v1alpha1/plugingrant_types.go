package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SecretGrant approves one Secret slot of the manifest and may bind it to a
// Secret of the owner's choosing, so two instances of one image read two
// accounts. Unbound, the slot's own name is used.
// ---
// Decisions: OF-1.
type SecretGrant struct {
	// Name of the manifest's Secret slot.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// SecretName is the owner's Secret mounted for the slot.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// PluginGrantSpec is what the owner approved for the Plugin of the same name.
// ---
// Decisions: D-16.
type PluginGrantSpec struct {
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	Capabilities []Capability `json:"capabilities,omitempty"`
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	Egress []EgressHost `json:"egress,omitempty"`
	// OwnerEgress lists egress hosts of the owner's choosing that the
	// manifest does not name, such as the owner's own WebDAV server. They
	// fill the manifest's ownerEgress slots; a grant listing more of them
	// than the manifest has slots runs nothing new. None may also be in egress.
	// ---
	// Decisions: OF-36.
	// +kubebuilder:validation:MaxItems=8
	// +listType=set
	// +optional
	OwnerEgress []EgressHost `json:"ownerEgress,omitempty"`
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Secrets []SecretGrant `json:"secrets,omitempty"`
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +optional
	DataTiers []DataTier `json:"dataTiers,omitempty"`
	// ImagePullSecrets names Secrets in the plugin's namespace the kubelet
	// pulls the plugin's image with, set on its pod and ServiceAccount. The
	// owner chooses them (the manifest cannot ask for one); the operator only
	// names them and never reads them.
	// ---
	// Decisions: D-29.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=set
	// +optional
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// Resources approves the manifest's resources up to these values; a
	// field left out approves the default only.
	// +optional
	Resources *Resources `json:"resources,omitempty"`
}

// PluginGrantStatus says whether the grant is valid.
type PluginGrantStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Valid.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PluginGrant is the owner's approval for the Plugin of the same name.
// Deleting it revokes everything at once.
// ---
// Decisions: D-16.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=pg,categories=openfief
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 56",message="name must be at most 56 characters so plugin-<name> fits 63"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="name must be a lower-case DNS label starting with a letter"
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PluginGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PluginGrantSpec   `json:"spec,omitempty"`
	Status PluginGrantStatus `json:"status,omitempty"`
}

// PluginGrantList is a list of PluginGrants.
// +kubebuilder:object:root=true
type PluginGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PluginGrant `json:"items"`
}
