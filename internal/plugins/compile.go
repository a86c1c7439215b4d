package plugins

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Identity and token constants every plugin workload uses (D-27, D-63).
const (
	// AudienceCore is the audience of the token a plugin presents to the core (D-27).
	AudienceCore = "openfief-core"
	// AudienceEgress is the audience of the token a plugin presents to the
	// egress proxy, so the proxy never sees a token the core accepts (D-63).
	AudienceEgress = "openfief-egress"
	// CoreTokenPath is where the openfief-core token is projected.
	CoreTokenPath = "/var/run/secrets/openfief/token"
	// EgressTokenPath is where the openfief-egress token is projected.
	EgressTokenPath = "/var/run/secrets/openfief-egress/token"
	// TokenExpirationSeconds is how long a projected token is valid; the
	// kubelet refreshes it before then.
	TokenExpirationSeconds = 3600
	// JWKSConfigMap holds the cluster's token-signing public keys the SDK
	// verifies the core's calls with (D-59).
	JWKSConfigMap = "openfief-sa-jwks"
	// JWKSDir is where every plugin pod mounts JWKSConfigMap, read-only.
	JWKSDir = "/var/run/secrets/openfief-sa-jwks"
	// DefaultPluginPort is the port a plugin serves on when Topology names none.
	DefaultPluginPort = 8080
	// DefaultCoreSubject is the core's ServiceAccount username, the subject
	// the SDK requires in the core's tokens when Topology names none.
	DefaultCoreSubject = "system:serviceaccount:" + Namespace + ":openfief-core"
	// dnsPort is never allowed by any rule (D-32).
	dnsPort = 53
)

// The environment variables Compile sets; the SDK reads the same names.
const (
	// EnvCoreAddress is the core's ClusterIP:port; plugins have no DNS (D-32).
	EnvCoreAddress = "OPENFIEF_CORE_ADDRESS"
	// EnvListenPort is the port the plugin serves the core on.
	EnvListenPort = "OPENFIEF_LISTEN_PORT"
	// EnvInstance is the plugin instance's name, its token audience's suffix (D-59).
	EnvInstance = "OPENFIEF_INSTANCE"
	// EnvCoreSubject is the core's ServiceAccount username the SDK requires (D-59).
	EnvCoreSubject = "OPENFIEF_CORE_SUBJECT"
	// EnvSAJWKSDir is where the cluster's token-signing keys are mounted (D-59).
	EnvSAJWKSDir = "OPENFIEF_SA_JWKS_DIR"
	// EnvTokenFile names the openfief-core token's file (D-27).
	EnvTokenFile = "OPENFIEF_TOKEN_FILE"
	// EnvEgressTokenFile names the openfief-egress token's file; egress only (D-63).
	EnvEgressTokenFile = "OPENFIEF_EGRESS_TOKEN_FILE"
	// EnvHTTPSProxy is http://<proxy ClusterIP>:<port>; egress only (D-32).
	EnvHTTPSProxy = "HTTPS_PROXY"
	// EnvNoProxy is the core's ClusterIP, reached directly; egress only (D-32).
	EnvNoProxy = "NO_PROXY"
)

// ErrInvalidTopology is returned when a Topology field is missing or not an
// address or port the workload can use.
var ErrInvalidTopology = errors.New("invalid topology")

// Topology is where the core and the egress proxy are, by address: plugins
// have no DNS (D-32), so every address is a ClusterIP and port. NetworkPolicy
// matches pod ports, so the pod ports are given too.
type Topology struct {
	// CoreAddress is the core Service's ClusterIP:port; required.
	CoreAddress string
	// CorePodPort is the port the core's pods listen on; required.
	CorePodPort int
	// ProxyAddress is the egress proxy Service's ClusterIP:port; required
	// only for a plugin with egress, checked whenever set.
	ProxyAddress string
	// ProxyPodPort is the port the proxy's pods listen on; as ProxyAddress.
	ProxyPodPort int
	// PluginPort is the port the plugin serves on; DefaultPluginPort if zero.
	PluginPort int
	// CoreSubject is the core's ServiceAccount username; DefaultCoreSubject
	// if empty.
	CoreSubject string
}

// Peer names the other end of a NetworkPolicy rule. The operator selects its
// pods with the Service selector of the same component.
type Peer string

// The only peers a plugin ever talks to (D-32, D-59).
const (
	// PeerCore is the core's pods: the only ingress peer and an egress peer.
	PeerCore Peer = "core"
	// PeerEgressProxy is the egress proxy's pods, reached only with egress.
	PeerEgressProxy Peer = "egress-proxy"
)

// NetworkRule admits TCP traffic to or from one peer's pods on one pod port.
type NetworkRule struct {
	Peer Peer
	Port int
}

// NetworkPolicy is the plugin pod's policy as data: it denies both directions
// except these rules, and never admits DNS (D-32).
type NetworkPolicy struct {
	// Ingress admits the core's pods to the plugin port (D-59).
	Ingress []NetworkRule
	// Egress admits the core's pod port, and the proxy's pod port only when
	// an egress host is granted.
	Egress []NetworkRule
}

// ProjectedToken is one projected ServiceAccount token (D-27, D-63): its
// audience, the file it is projected to, how long it lasts and the
// environment variable that names the file.
type ProjectedToken struct {
	Audience          string
	Path              string
	ExpirationSeconds int64
	EnvVar            string
}

// Dir is the directory the token's volume is mounted at.
func (t ProjectedToken) Dir() string { return path.Dir(t.Path) }

// File is the token's file name inside Dir.
func (t ProjectedToken) File() string { return path.Base(t.Path) }

// WorkloadSecret is one granted Secret mounted read-only (D-29: the owner's
// Secret, only named here).
type WorkloadSecret struct {
	// Slot is the manifest's slot the Secret fills.
	Slot string
	// SecretName is the Secret mounted (OF-1).
	SecretName string
	MountPath  string
	ReadOnly   bool
}

// ConfigMapMount is a ConfigMap mounted read-only into the plugin pod.
type ConfigMapMount struct {
	Name      string
	MountPath string
	ReadOnly  bool
}

// EnvVar is one environment variable of the plugin container.
type EnvVar struct {
	Name  string
	Value string
}

// Workload is everything the operator creates for one plugin, compiled from
// its effective permissions (D-11): identity, tokens, mounts, environment,
// NetworkPolicy and egress allow-list. It holds no Kubernetes types; the
// operator's BuildObjects maps it onto objects and adds the image, the config
// (OPENFIEF_CONFIG and its ConfigMap) and the pod's hardening. Every list is
// sorted.
type Workload struct {
	// Name is the plugin instance.
	Name string
	// Namespace is where every object lives (D-15).
	Namespace string
	// ServiceAccountName is plugin-<name>, the plugin identity (D-27). It
	// has no Role: plugins never talk to the Kubernetes API.
	ServiceAccountName string
	// AutomountAPIToken is always false.
	AutomountAPIToken bool
	// Tokens is the openfief-core token, plus the openfief-egress token only
	// with egress (D-63), sorted by audience.
	Tokens []ProjectedToken
	// Secrets are the granted Secrets, read-only, sorted by mount path.
	Secrets []WorkloadSecret
	// ConfigMaps are the read-only ConfigMap mounts: openfief-sa-jwks (D-59).
	ConfigMaps []ConfigMapMount
	// Env is the container environment Compile owns, sorted by name.
	Env []EnvVar
	// PluginPort is the port the plugin serves on and the Service targets.
	PluginPort int
	// NetworkPolicy admits only the core and, with egress, the proxy (D-32).
	NetworkPolicy NetworkPolicy
	// AllowList is exactly the effective egress hosts, canonical and sorted:
	// the plugin's entry in the egress allow-list (D-32).
	AllowList []string
	// Capabilities and DataTiers are carried from the effective permissions.
	Capabilities []Capability
	DataTiers    []string
	// ImagePullSecrets are the grant's pull Secrets, sorted, set on the pod
	// and on the plugin's ServiceAccount; only named, never read (D-29).
	ImagePullSecrets []string
	// Resources bound the plugin's container: memory, CPU, node disk and
	// the size of its /tmp.
	Resources WorkloadResources
}

// WorkloadResources are the numbers the operator sets on the plugin's
// container and its /tmp volume. /tmp is held in memory (so a full /tmp
// never fills the node's disk), and its pages count against the container's
// memory, so the memory limit is the plugin's memory plus its /tmp. Memory's
// request equals its limit, so the scheduler never places plugins whose
// memory the node does not have.
type WorkloadResources struct {
	// MemoryBytes is the container's memory request and limit.
	MemoryBytes int64
	// CPURequestMilli and CPULimitMilli are thousandths of a CPU.
	CPURequestMilli int64
	CPULimitMilli   int64
	// EphemeralRequestBytes and EphemeralLimitBytes bound the node disk the
	// container uses (its log).
	EphemeralRequestBytes int64
	EphemeralLimitBytes   int64
	// TmpBytes is the size of the in-memory /tmp.
	TmpBytes int64
}

// compileResources turns the effective limits into the container's numbers.
func compileResources(l ResourceLimits) WorkloadResources {
	return WorkloadResources{
		MemoryBytes:           l.MemoryBytes + l.TmpBytes,
		CPURequestMilli:       min(CPURequestMilli, l.CPUMilli),
		CPULimitMilli:         l.CPUMilli,
		EphemeralRequestBytes: EphemeralRequest,
		EphemeralLimitBytes:   EphemeralLimit,
		TmpBytes:              l.TmpBytes,
	}
}

// EgressToken returns the openfief-egress token, if the workload has one.
func (w Workload) EgressToken() (ProjectedToken, bool) {
	i := slices.IndexFunc(w.Tokens, func(t ProjectedToken) bool { return t.Audience == AudienceEgress })
	if i < 0 {
		return ProjectedToken{}, false
	}
	return w.Tokens[i], true
}

// Compile turns effective permissions into the plugin's Workload (D-11). It is
// deterministic: the same input always gives the same Workload. A plugin gets
// the openfief-core token always (D-27); the openfief-egress token,
// HTTPS_PROXY/NO_PROXY and the egress rule to the proxy only when some egress
// host is granted (D-32, D-63); and never a rule for DNS. It also owns the
// environment the SDK reads (EnvCoreAddress, EnvListenPort, EnvInstance,
// EnvCoreSubject, EnvSAJWKSDir, EnvTokenFile) and the read-only JWKSConfigMap
// mount (D-59), and the container's resources (compileResources), so the
// operator adds only the image, the config and the pod's hardening. Topology errors are
// *FieldErrors naming the field ("topology.coreAddress") and wrapping
// ErrInvalidTopology; the zero EffectivePermissions is refused with
// ErrNoCapabilityGranted.
func Compile(e EffectivePermissions, t Topology) (Workload, error) {
	if e.name == "" || len(e.capabilities) == 0 {
		return Workload{}, fmt.Errorf("compile: %w", ErrNoCapabilityGranted)
	}
	top, err := t.resolve(e.HasEgress())
	if err != nil {
		return Workload{}, err
	}

	w := Workload{
		Name:               e.name,
		Namespace:          Namespace,
		ServiceAccountName: ServiceAccountName(e.name),
		AutomountAPIToken:  false,
		Tokens: []ProjectedToken{{
			Audience: AudienceCore, Path: CoreTokenPath, ExpirationSeconds: TokenExpirationSeconds, EnvVar: EnvTokenFile,
		}},
		ConfigMaps: []ConfigMapMount{{Name: JWKSConfigMap, MountPath: JWKSDir, ReadOnly: true}},
		PluginPort: top.pluginPort,
		NetworkPolicy: NetworkPolicy{
			Ingress: []NetworkRule{{Peer: PeerCore, Port: top.pluginPort}},
			Egress:  []NetworkRule{{Peer: PeerCore, Port: t.CorePodPort}},
		},
		AllowList:    e.Egress(),
		Capabilities: e.Capabilities(),
		DataTiers:    e.DataTiers(),

		ImagePullSecrets: e.ImagePullSecrets(),
		Resources:        compileResources(e.resources),
	}
	env := map[string]string{
		EnvCoreAddress: top.core.String(),
		EnvListenPort:  strconv.Itoa(top.pluginPort),
		EnvInstance:    e.name,
		EnvCoreSubject: top.coreSubject,
		EnvSAJWKSDir:   JWKSDir,
		EnvTokenFile:   CoreTokenPath,
	}
	if e.HasEgress() {
		w.Tokens = append(w.Tokens, ProjectedToken{
			Audience: AudienceEgress, Path: EgressTokenPath, ExpirationSeconds: TokenExpirationSeconds, EnvVar: EnvEgressTokenFile,
		})
		w.NetworkPolicy.Egress = append(w.NetworkPolicy.Egress, NetworkRule{Peer: PeerEgressProxy, Port: t.ProxyPodPort})
		env[EnvEgressTokenFile] = EgressTokenPath
		env[EnvHTTPSProxy] = "http://" + top.proxy.String()
		env[EnvNoProxy] = top.core.Addr().String()
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		w.Env = append(w.Env, EnvVar{Name: name, Value: env[name]})
	}
	for _, s := range e.secrets {
		w.Secrets = append(w.Secrets, WorkloadSecret{Slot: s.Slot, SecretName: s.SecretName, MountPath: s.MountPath, ReadOnly: true})
	}
	slices.SortFunc(w.Secrets, func(a, b WorkloadSecret) int {
		return cmp.Or(strings.Compare(a.MountPath, b.MountPath), strings.Compare(a.Slot, b.Slot))
	})
	slices.SortFunc(w.Tokens, func(a, b ProjectedToken) int { return strings.Compare(a.Audience, b.Audience) })
	sortRules(w.NetworkPolicy.Ingress)
	sortRules(w.NetworkPolicy.Egress)
	return w, nil
}

func sortRules(rules []NetworkRule) {
	slices.SortFunc(rules, func(a, b NetworkRule) int {
		return cmp.Or(strings.Compare(string(a.Peer), string(b.Peer)), cmp.Compare(a.Port, b.Port))
	})
}

// resolvedTopology is a Topology after checking, with defaults applied.
type resolvedTopology struct {
	core, proxy netip.AddrPort
	pluginPort  int
	coreSubject string
}

// resolve checks t, collecting every problem as a *FieldError. The proxy's
// fields are required only when egress is granted, and checked whenever set.
func (t Topology) resolve(egress bool) (resolvedTopology, error) {
	var errs fieldErrors
	r := resolvedTopology{pluginPort: t.PluginPort, coreSubject: t.CoreSubject}
	if r.pluginPort == 0 {
		r.pluginPort = DefaultPluginPort
	}
	if r.coreSubject == "" {
		r.coreSubject = DefaultCoreSubject
	}
	r.core = checkAddress(&errs, "topology.coreAddress", t.CoreAddress)
	checkPort(&errs, "topology.corePodPort", t.CorePodPort)
	checkPort(&errs, "topology.pluginPort", r.pluginPort)
	if egress || t.ProxyAddress != "" {
		r.proxy = checkAddress(&errs, "topology.proxyAddress", t.ProxyAddress)
	}
	if egress || t.ProxyPodPort != 0 {
		checkPort(&errs, "topology.proxyPodPort", t.ProxyPodPort)
	}
	if strings.ContainsAny(r.coreSubject, " \t\r\n\x00") {
		errs.add("topology.coreSubject", ErrInvalidTopology, "holds whitespace or NUL")
	}
	return r, errs.err()
}

// checkAddress requires an IP address and port, as a ClusterIP Service has:
// no name, no zone, not unspecified, not port 0 or 53.
func checkAddress(errs *fieldErrors, field, s string) netip.AddrPort {
	if s == "" {
		errs.add(field, ErrInvalidTopology, "required: a ClusterIP and port")
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		errs.add(field, ErrInvalidTopology, fmt.Sprintf("%q is not an IP address and port (plugins have no DNS)", s))
		return netip.AddrPort{}
	}
	switch a := ap.Addr(); {
	case a.Zone() != "" || a.IsUnspecified():
		errs.add(field, ErrInvalidTopology, fmt.Sprintf("%q is not a ClusterIP", s))
	case ap.Port() == 0 || ap.Port() == dnsPort:
		errs.add(field, ErrInvalidTopology, fmt.Sprintf("port %d is not allowed", ap.Port()))
	}
	return ap
}

// checkPort requires 1 to 65535 and never the DNS port (D-32).
func checkPort(errs *fieldErrors, field string, p int) {
	switch {
	case p < 1 || p > 65535:
		errs.add(field, ErrInvalidTopology, fmt.Sprintf("%d is not 1 to 65535", p))
	case p == dnsPort:
		errs.add(field, ErrInvalidTopology, "port 53 is DNS, which plugins never reach")
	}
}
