package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Names and paths of what BuildObjects puts in a plugin pod.
const (
	// containerName is the plugin's one container.
	containerName = "plugin"
	// portName names the plugin port on the container and the Service.
	portName = "connect"
	// configKey is the config ConfigMap's key; OPENFIEF_CONFIG carries it.
	configKey = "config.json"
	// EnvConfig carries the instance's JSON config to the SDK's LoadConfig.
	EnvConfig = "OPENFIEF_CONFIG"
	// AnnotationConfigHash on the pod template holds the SHA-256 of the
	// config, so a config change replaces the pod.
	AnnotationConfigHash = "openfief.io/config-hash"
	// tmpDir is a writable scratch directory; the root filesystem is read-only.
	tmpDir = plugins.TmpDir
	// PluginUID and PluginGID are the user and group every plugin's process
	// runs as, whatever its image says: never group 0, even for an image
	// without /etc/passwd, whose user would otherwise get group 0 and
	// supplementary group 0. The same ids as the platform's own pods
	// (distroless "nonroot").
	PluginUID int64 = 65532
	PluginGID int64 = 65532
)

// PodLabels are the labels of plugin name's pods, and the selector of its
// Deployment, Service and NetworkPolicy, built of the domain's pod label
// constants (internal/plugins, podlabels.go).
func PodLabels(name string) map[string]string {
	return map[string]string{
		plugins.LabelName:       plugins.ValuePluginName,
		plugins.LabelComponent:  plugins.ValueComponentPlugin,
		plugins.LabelManagedBy:  plugins.ValueManagedBy,
		plugins.LabelPluginName: name,
	}
}

// Objects is everything the operator owns for one running plugin. Each is
// named plugin-<name> in the openfief namespace and controlled by the Plugin.
type Objects struct {
	ServiceAccount *corev1.ServiceAccount
	ConfigMap      *corev1.ConfigMap
	Service        *corev1.Service
	NetworkPolicy  *networkingv1.NetworkPolicy
	Deployment     *appsv1.Deployment
}

// List returns the objects in the order they are applied: identity and
// config first, the NetworkPolicy before the pod that it confines.
func (o Objects) List() []client.Object {
	return []client.Object{o.ServiceAccount, o.ConfigMap, o.Service, o.NetworkPolicy, o.Deployment}
}

// BuildObjects maps a compiled Workload onto Kubernetes objects (D-11, D-27,
// D-28, D-32, D-63): a ServiceAccount without an API token, the config
// ConfigMap, a ClusterIP Service, a NetworkPolicy that denies everything but
// the workload's rules, and a single-replica Recreate Deployment whose pod
// meets the restricted Pod Security Standard. It is deterministic: the same
// input gives the same objects.
func BuildObjects(p *v1alpha1.Plugin, image string, config []byte, w plugins.Workload, c Cluster) Objects {
	if len(config) == 0 {
		config = []byte("{}")
	}
	name := plugins.ServiceAccountName(p.Name)
	labels := PodLabels(p.Name)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:            name,
			Namespace:       plugins.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(p)},
		}
	}
	sum := sha256.Sum256(config)

	return Objects{
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(),
			// Plugins never talk to the Kubernetes API (D-11: RBAC compiles to none).
			AutomountServiceAccountToken: ptr.To(w.AutomountAPIToken),
			// The owner's pull Secrets, named by the grant and never read (D-29).
			ImagePullSecrets: pullSecretRefs(w.ImagePullSecrets),
		},
		ConfigMap: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(),
			Data:       map[string]string{configKey: string(config)},
		},
		Service: &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta(),
			Spec: corev1.ServiceSpec{
				// ClusterIP only: plugins are never exposed outside the cluster (D-28).
				Type:     corev1.ServiceTypeClusterIP,
				Selector: labels,
				Ports: []corev1.ServicePort{{
					Name: portName, Protocol: corev1.ProtocolTCP,
					Port: int32(w.PluginPort), TargetPort: intstr.FromInt32(int32(w.PluginPort)),
				}},
			},
		},
		NetworkPolicy: buildNetworkPolicy(meta(), p.Name, w.NetworkPolicy, c),
		Deployment: &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta(),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				// Recreate: an old pod never runs beside a new one with other permissions.
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      labels,
						Annotations: map[string]string{AnnotationConfigHash: hex.EncodeToString(sum[:])},
					},
					Spec: buildPodSpec(name, image, w, c.Gate),
				},
			},
		},
	}
}

// DenyAllNetworkPolicy is the one object a plugin that runs nothing keeps: it
// selects the plugin's pods and allows no traffic either way, so a pod left
// behind by anything is cut off at once (revocation, D-16).
func DenyAllNetworkPolicy(p *v1alpha1.Plugin) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            plugins.ServiceAccountName(p.Name),
			Namespace:       plugins.Namespace,
			Labels:          PodLabels(p.Name),
			OwnerReferences: []metav1.OwnerReference{ownerRef(p)},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: PodLabels(p.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
}

// buildNetworkPolicy denies both directions except the workload's rules. Peers
// are the core's and the proxy's pods, selected by their Services' selectors;
// no rule ever allows DNS (D-32).
func buildNetworkPolicy(meta metav1.ObjectMeta, plugin string, np plugins.NetworkPolicy, c Cluster) *networkingv1.NetworkPolicy {
	peer := func(p plugins.Peer) []networkingv1.NetworkPolicyPeer {
		sel := c.CoreSelector
		if p == plugins.PeerEgressProxy {
			sel = c.ProxySelector
		}
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: sel}}}
	}
	port := func(n int) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(int32(n)))}}
	}
	out := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: PodLabels(plugin)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	for _, r := range np.Ingress {
		out.Spec.Ingress = append(out.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peer(r.Peer), Ports: port(r.Port)})
	}
	for _, r := range np.Egress {
		out.Spec.Egress = append(out.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: peer(r.Peer), Ports: port(r.Port)})
	}
	return out
}

// buildPodSpec hardens the pod to the restricted Pod Security Standard,
// mounts exactly the workload's tokens, Secrets and ConfigMaps, and starts
// the plugin only after the isolation gate (OF-42).
func buildPodSpec(name, image string, w plugins.Workload, gate IsolationGate) corev1.PodSpec {
	var (
		volumes []corev1.Volume
		mounts  []corev1.VolumeMount
	)
	for _, t := range w.Tokens {
		vol := "token-" + t.Audience
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: t.Audience, ExpirationSeconds: ptr.To(t.ExpirationSeconds), Path: t.File(),
				},
			}}},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: t.Dir(), ReadOnly: true})
	}
	for i, s := range w.Secrets {
		vol := "secret-" + strconv.Itoa(i)
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: s.SecretName},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: s.MountPath, ReadOnly: true})
	}
	for i, cm := range w.ConfigMaps {
		vol := "configmap-" + strconv.Itoa(i)
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			// Not optional: until openfief-sa-jwks exists the pod does not start (D-59).
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: cm.MountPath, ReadOnly: cm.ReadOnly})
	}
	// /tmp is held in memory with the size the workload allows: a plugin
	// that fills it gets "no space left on device", and the node's disk is
	// never touched. Its pages count against the container's memory limit,
	// which Compile sized for them.
	volumes = append(volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium:    corev1.StorageMediumMemory,
		SizeLimit: resource.NewQuantity(w.Resources.TmpBytes, resource.BinarySI),
	}}})
	mounts = append(mounts, corev1.VolumeMount{Name: "tmp", MountPath: tmpDir})

	env := make([]corev1.EnvVar, 0, len(w.Env)+1)
	for _, e := range w.Env {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	env = append(env, corev1.EnvVar{Name: EnvConfig, ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: configKey},
	}})

	return corev1.PodSpec{
		ServiceAccountName:           w.ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(w.AutomountAPIToken),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true),
			RunAsUser:    ptr.To(PluginUID),
			RunAsGroup:   ptr.To(PluginGID),
			// No fsGroup: Secret and ConfigMap files are world-readable
			// (0644) and the kubelet gives the projected tokens to
			// RunAsUser, so nothing needs a volume's ownership changed.
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		InitContainers: buildGateContainer(gate),
		Containers: []corev1.Container{{
			Name:            containerName,
			Image:           image,
			Ports:           []corev1.ContainerPort{{Name: portName, ContainerPort: int32(w.PluginPort), Protocol: corev1.ProtocolTCP}},
			Env:             env,
			Resources:       buildResources(w.Resources),
			SecurityContext: restrictedContainer(),
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(portName)},
			}},
			VolumeMounts: mounts,
		}},
		Volumes:          volumes,
		ImagePullSecrets: pullSecretRefs(w.ImagePullSecrets),
	}
}

// buildResources sets the container's requests and limits from the
// workload: memory requested as much as its limit (the scheduler never
// overcommits a node's memory with plugins), a small CPU request and the
// granted CPU limit, and node disk for its log. The process limit is the
// kubelet's podPidsLimit; a pod cannot set one.
func buildResources(r plugins.WorkloadResources) corev1.ResourceRequirements {
	mem := func() resource.Quantity { return *resource.NewQuantity(r.MemoryBytes, resource.BinarySI) }
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceMemory:           mem(),
			corev1.ResourceCPU:              *resource.NewMilliQuantity(r.CPURequestMilli, resource.DecimalSI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(r.EphemeralRequestBytes, resource.BinarySI),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory:           mem(),
			corev1.ResourceCPU:              *resource.NewMilliQuantity(r.CPULimitMilli, resource.DecimalSI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(r.EphemeralLimitBytes, resource.BinarySI),
		},
	}
}

// pullSecretRefs names the grant's pull Secrets in the Workload's (sorted)
// order; nil when the grant names none.
func pullSecretRefs(names []string) []corev1.LocalObjectReference {
	var refs []corev1.LocalObjectReference
	for _, n := range names {
		refs = append(refs, corev1.LocalObjectReference{Name: n})
	}
	return refs
}

// ownerRef makes the Plugin the controlling owner, so deleting it
// garbage-collects the workload whether or not the operator runs.
func ownerRef(p *v1alpha1.Plugin) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "Plugin",
		Name:               p.Name,
		UID:                p.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}
