package plugins

import "encoding/json"

// Capability is what a plugin may act as. A plugin without an approved
// capability has nothing it may do and does not run.
type Capability string

// The capabilities of M0.
const (
	// CapabilityConnector brings data in: the core calls its ConnectorService.
	CapabilityConnector Capability = "connector"
	// CapabilityView shows the record somewhere else.
	CapabilityView Capability = "view"
)

// knownCapability reports whether c is one of the capabilities this version knows.
func knownCapability(c Capability) bool {
	return c == CapabilityConnector || c == CapabilityView
}

// SecretMount is one Secret slot of a manifest: the Secret's name and the
// absolute path its files are mounted at. A grant may bind the slot to
// another Secret of the owner's choosing (OF-1).
type SecretMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

// Manifest is what a plugin declares it needs (D-11, D-42). It travels as the
// signed image label io.openfief.plugin.manifest and as a copy in the Plugin's
// spec.manifest; the two must be Equal.
type Manifest struct {
	// Capabilities lists what the plugin acts as; at least one.
	Capabilities []Capability `json:"capabilities"`
	// Egress lists the hosts the plugin reaches through the egress proxy, as
	// host or host:port (443 when no port is written).
	Egress []string `json:"egress,omitempty"`
	// Secrets lists the Secret slots the plugin reads, each with its mount path.
	Secrets []SecretMount `json:"secrets,omitempty"`
	// DataTiers names the data the plugin wants; only names for now (P-33).
	DataTiers []string `json:"dataTiers,omitempty"`
	// ConfigSchema is a JSON Schema for the plugin's config, if any.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	// OwnerEgress is how many egress hosts of the owner's choosing the plugin
	// may be granted, 0 to MaxOwnerEgress: slots the vendor asks for and only
	// the owner fills, in the grant's OwnerEgress (OF-36). A plugin that
	// talks to the owner's own server (a WebDAV share, a NAS) cannot name
	// that host when it is built.
	OwnerEgress int `json:"ownerEgress,omitempty"`
	// Resources is what the plugin's container needs beyond the defaults
	// (DefaultMemory, DefaultCPUMilli, DefaultTmp), up to the maxima; the
	// owner approves it in the grant's Resources like any other permission.
	// A dimension left empty, or asked at or below its default, needs no
	// approval.
	Resources Resources `json:"resources,omitzero"`
}

// MaxOwnerEgress caps a manifest's OwnerEgress slots and a grant's
// OwnerEgress hosts, as the CRDs do.
const MaxOwnerEgress = 8

// Plugin is the vendor's half (D-16): the installed instance's name, its image
// by digest, the manifest it declares and the owner's config for it.
type Plugin struct {
	// Name names the instance; every object of its workload is keyed by it (D-48).
	Name string
	// Image is the reference as written; Validate parses it with ParseImageRef.
	Image string
	// Manifest is the declared copy of the image's signed label.
	Manifest Manifest
	// Config is the instance's JSON config; nil or empty means none.
	Config json.RawMessage
}

// SecretGrant approves one Secret slot of the manifest. SecretName binds the
// slot to a Secret of the owner's choosing, so two instances of one image can
// read two accounts; empty keeps the slot's own name (OF-1).
type SecretGrant struct {
	Name       string `json:"name"`
	SecretName string `json:"secretName,omitempty"`
}

// Grant is the owner's half (D-16): what the owner approved for the plugin of
// the same name. Only what both the Plugin and its Grant hold is enforced.
type Grant struct {
	// Name is the plugin instance this grant approves.
	Name         string
	Capabilities []Capability
	// Egress approves hosts the manifest requests; a host it does not
	// request adds nothing (D-16).
	Egress []string
	// OwnerEgress lists hosts of the owner's choosing that the manifest
	// does not name, filling its OwnerEgress slots (OF-36). Effective
	// refuses the grant when more of them than the slots are left over.
	OwnerEgress []string
	Secrets     []SecretGrant
	DataTiers   []string
	// ImagePullSecrets names the owner's Secrets the kubelet pulls the
	// plugin's image with; the operator never reads them (D-29).
	ImagePullSecrets []string
	// Resources approves the manifest's Resources up to these values; an
	// empty dimension approves the default only.
	Resources Resources
}
