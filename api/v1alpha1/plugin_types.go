package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Capability is what a plugin may act as (connector or view in M0).
// +kubebuilder:validation:Enum=connector;view
type Capability string

// EgressHost is a host name with an optional port (443 when none is written).
// The CRD checks only its shape; the domain refuses IP literals, wildcards and
// single labels, and no control or bidi character.
// ---
// Decisions: D-32, OF-17.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=300
// +kubebuilder:validation:Pattern=`^[^\s/@*\[\]\x00-\x1F\x7F-\x9F\x{061C}\x{200E}\x{200F}\x{2028}-\x{202E}\x{2066}-\x{2069}]+$`
type EgressHost string

// DataTier names a kind of data a plugin wants; a name only for now.
// ---
// Decisions: P-33.
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]{1,32}$`
type DataTier string

// MemoryQuantity is an amount of memory: a whole number without leading
// zeros, then Mi or Gi, such as 512Mi or 1Gi. The domain checks the bounds.
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:Pattern=`^[1-9][0-9]{0,4}(Mi|Gi)$`
type MemoryQuantity string

// CPUQuantity is an amount of CPU: whole cores (1 to 99) or millicores,
// such as 2 or 250m. The domain checks the bounds.
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:Pattern=`^([1-9][0-9]?|[1-9][0-9]{0,4}m)$`
type CPUQuantity string

// Resources bound a plugin's container. In a manifest they are what the
// plugin asks for instead of the defaults (128Mi of memory, 500m of CPU,
// 64Mi of /tmp), at most 2Gi, 2 and 1Gi; in a grant, what the owner approved
// of that, at least the defaults. A field left out means the default.
type Resources struct {
	// Memory the plugin's processes may hold, besides /tmp.
	// +optional
	Memory MemoryQuantity `json:"memory,omitempty"`
	// CPU is the plugin's CPU limit.
	// +optional
	CPU CPUQuantity `json:"cpu,omitempty"`
	// Tmp is the size of the plugin's /tmp, which is held in memory.
	// +optional
	Tmp MemoryQuantity `json:"tmp,omitempty"`
}

// SecretMount is one Secret slot of a manifest: the owner's Secret of that
// name (or the one the grant binds to the slot) is mounted read-only at
// MountPath.
// ---
// Decisions: D-29.
type SecretMount struct {
	// Name of the Secret slot, and the Secret mounted when the grant binds none.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// MountPath is an absolute, clean path outside /var/run/secrets,
	// without control or bidi characters.
	// ---
	// Decisions: OF-17.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\x00-\x1F\x7F-\x9F\x{061C}\x{200E}\x{200F}\x{2028}-\x{202E}\x{2066}-\x{2069}]*$`
	MountPath string `json:"mountPath"`
}

// Manifest is what the plugin declares it needs; it must equal the image's
// signed io.openfief.plugin.manifest label.
// ---
// Decisions: D-42.
type Manifest struct {
	// Capabilities the plugin acts as.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	Capabilities []Capability `json:"capabilities"`
	// Egress hosts the plugin reaches through the egress proxy.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	Egress []EgressHost `json:"egress,omitempty"`
	// Secrets the plugin reads, each mounted read-only at its path.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Secrets []SecretMount `json:"secrets,omitempty"`
	// DataTiers the plugin wants.
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +optional
	DataTiers []DataTier `json:"dataTiers,omitempty"`
	// ConfigSchema is a JSON Schema for spec.config.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	ConfigSchema *apiextensionsv1.JSON `json:"configSchema,omitempty"`
	// OwnerEgress is how many egress hosts of the owner's choosing the plugin
	// may be granted, such as the owner's own WebDAV server: slots the
	// PluginGrant's ownerEgress fills; the vendor names none of the hosts.
	// ---
	// Decisions: OF-36.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	OwnerEgress int32 `json:"ownerEgress,omitempty"`
	// Resources the plugin needs beyond the defaults, which the owner
	// approves in the PluginGrant's resources.
	// +optional
	Resources *Resources `json:"resources,omitempty"`
}

// PluginSpec is the vendor's request for one plugin instance.
// ---
// Decisions: D-16.
type PluginSpec struct {
	// Image is the plugin image pinned by digest, repository@sha256:<hex>.
	// A tag, even beside the digest, is refused, and so is a control or bidi
	// character.
	// ---
	// Decisions: D-17, OF-17.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^@\x00-\x1F\x7F-\x9F\x{061C}\x{200E}\x{200F}\x{2028}-\x{202E}\x{2066}-\x{2069}]+@sha256:[0-9a-f]{64}$`
	Image string `json:"image"`
	// Manifest is a copy of the image's signed manifest label.
	// ---
	// Decisions: D-42.
	Manifest Manifest `json:"manifest"`
	// Config is the instance's configuration, checked against the manifest's
	// config schema. Missing means {}.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
}

// GrantedSecret is one Secret of the effective permissions: the manifest's
// slot, the Secret actually mounted and where.
type GrantedSecret struct {
	// Name of the manifest's Secret slot.
	Name string `json:"name"`
	// SecretName is the Secret mounted for the slot.
	// ---
	// Decisions: OF-1.
	SecretName string `json:"secretName"`
	// MountPath where it is mounted.
	MountPath string `json:"mountPath"`
}

// EffectivePermissions is what the running version holds: what both its
// manifest and the current grant allow.
// ---
// Decisions: D-16.
type EffectivePermissions struct {
	// +optional
	Capabilities []Capability `json:"capabilities,omitempty"`
	// Egress hosts in canonical host:port form.
	// +optional
	Egress []string `json:"egress,omitempty"`
	// +optional
	Secrets []GrantedSecret `json:"secrets,omitempty"`
	// +optional
	DataTiers []string `json:"dataTiers,omitempty"`
	// Resources the running version's container has: memory, CPU and /tmp,
	// each written in full.
	// +optional
	Resources *Resources `json:"resources,omitempty"`
}

// PendingApproval is what the current spec requests beyond the grant; the
// owner approves it by adding it to the PluginGrant.
type PendingApproval struct {
	// +optional
	Capabilities []Capability `json:"capabilities,omitempty"`
	// Egress hosts in canonical host:port form.
	// +optional
	Egress []string `json:"egress,omitempty"`
	// Secret slot names.
	// +optional
	Secrets []string `json:"secrets,omitempty"`
	// +optional
	DataTiers []string `json:"dataTiers,omitempty"`
	// Resources the manifest asks for beyond the grant; only those fields.
	// +optional
	Resources *Resources `json:"resources,omitempty"`
}

// DeployedVersion records the version that runs and how its image was
// verified. The operator keeps the record it trusts to run a verified version
// through a registry outage and an operator restart on the plugin's
// pod template (annotation openfief.io/verified-version), which only it may
// write; status.deployed reports that record and is never read back.
// ---
// Decisions: OF-2.
type DeployedVersion struct {
	// Image is the digest-pinned reference that runs.
	Image string `json:"image"`
	// Manifest is that version's manifest.
	Manifest Manifest `json:"manifest"`
	// Config is the config that version runs with.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
	// Signer names the trusted signer whose signature verified.
	// +optional
	Signer string `json:"signer,omitempty"`
	// Trust is Verified or SignedByTrustedSigner.
	// ---
	// Decisions: D-56.
	// +optional
	Trust string `json:"trust,omitempty"`
	// VerifiedAt is when the signature last verified.
	// +optional
	VerifiedAt *metav1.Time `json:"verifiedAt,omitempty"`
}

// MaxPluginHistory is how many revisions status.history keeps: the newest
// first, the oldest dropped when another starts.
const MaxPluginHistory = 5

// PluginRevision is one version of a plugin that the operator verified and
// ran: its image by digest and how it verified. A new revision is recorded
// when another image starts running than the newest revision names; a change
// of config alone, or the same image starting again, records none. Like
// status.deployed it is a report: rolling back to a revision changes
// spec.image, and the image is verified again as any new one is.
type PluginRevision struct {
	// Revision numbers the plugin's revisions from 1, each one more than
	// the one before; a rollback records a new revision with an older image.
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`
	// Image is the digest-pinned reference that ran.
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`
	// ManifestDigest is sha256:<hex> of that version's manifest in a
	// canonical form: two manifests that ask for the same thing have the
	// same digest.
	// +kubebuilder:validation:MaxLength=71
	// +optional
	ManifestDigest string `json:"manifestDigest,omitempty"`
	// Signer names the trusted signer whose signature verified.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Signer string `json:"signer,omitempty"`
	// Trust is Verified or SignedByTrustedSigner.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Trust string `json:"trust,omitempty"`
	// FirstRan is when the operator first deployed this revision.
	FirstRan metav1.Time `json:"firstRan"`
	// LastRan is when another revision replaced it; empty for the newest.
	// +optional
	LastRan *metav1.Time `json:"lastRan,omitempty"`
}

// PluginStatus is what the operator saw and did.
type PluginStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, SignatureVerified, ApprovalRequired.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Deployed reports the version that runs, if any (while the core's or
	// the proxy's Service is unavailable: the one that resumes). A report
	// only: the operator trusts the record on the plugin's pod template.
	// +optional
	Deployed *DeployedVersion `json:"deployed,omitempty"`
	// PendingApproval is what the spec requests beyond the grant.
	// +optional
	PendingApproval *PendingApproval `json:"pendingApproval,omitempty"`
	// Effective is what the running version holds.
	// +optional
	Effective *EffectivePermissions `json:"effective,omitempty"`
	// History lists the plugin's recent revisions, newest first, at most
	// MaxPluginHistory of them: what 'openfief plugin history' shows and
	// 'openfief plugin rollback' returns to.
	// +kubebuilder:validation:MaxItems=5
	// +listType=atomic
	// +optional
	History []PluginRevision `json:"history,omitempty"`
}

// Plugin is one installed instance of a plugin image: the vendor's request.
// The operator runs it only with what its PluginGrant of the same name also
// allows, and only when a trusted signer signed its image.
// ---
// Decisions: D-13, D-16.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=plg,categories=openfief
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 56",message="name must be at most 56 characters so plugin-<name> fits 63"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="name must be a lower-case DNS label starting with a letter"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="SignatureVerified",type=string,JSONPath=`.status.conditions[?(@.type=="SignatureVerified")].status`
// +kubebuilder:printcolumn:name="ApprovalRequired",type=string,JSONPath=`.status.conditions[?(@.type=="ApprovalRequired")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Plugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PluginSpec   `json:"spec"`
	Status PluginStatus `json:"status,omitempty"`
}

// PluginList is a list of Plugins.
// +kubebuilder:object:root=true
type PluginList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Plugin `json:"items"`
}
