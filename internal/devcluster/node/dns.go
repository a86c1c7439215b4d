package node

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
)

// The cluster DNS (Options.ClusterDNS): CoreDNS, built by `make node` from
// hack/tools/coredns with only the kubernetes, forward, cache, errors,
// health, ready and loop plugins, runs as a pod of the real node behind the kube-dns
// Service at the kubelet's clusterDNS address, as kubeadm names them.
const (
	// ClusterDNSService is the cluster DNS's Service in kube-system.
	ClusterDNSService = "kube-dns"
	// corednsBin is CoreDNS's binary in the binary directory.
	corednsBin = "coredns"
	// dnsName names CoreDNS's Deployment, ServiceAccount and ConfigMap in
	// kube-system.
	dnsName = "coredns"
	// dnsRole is CoreDNS's ClusterRole and ClusterRoleBinding.
	dnsRole = "openfief:coredns"
	// dnsPort is where CoreDNS listens in its pod: 53, as on every
	// cluster, because NetworkPolicies judge a connection after the
	// Service's translation and deploy/ allows DNS to the kube-dns pods on
	// port 53. The pod binds it as a non-root user with no capability:
	// its unprivileged port range starts at 53 (dnsPodSpec's sysctl).
	dnsPort = 53
	// dnsHealthPort and dnsReadyPort serve the health and ready plugins.
	dnsHealthPort = 8080
	dnsReadyPort  = 8181
	// corednsModule is the module the binary is built from.
	corednsModule = "github.com/coredns/coredns"
	// dnsUser is the user CoreDNS runs as: the images' non-root user.
	dnsUser = int64(images.UID)
)

// dnsLabels select CoreDNS's pods.
var dnsLabels = map[string]string{"k8s-app": ClusterDNSService}

// corefile is CoreDNS's configuration, in the shape kubeadm gives a
// cluster: the kubernetes plugin answers the cluster's zone (Services and
// their endpoints by name) and reverse lookups of their addresses, and
// every other name is forwarded to the resolver in the pod's resolv.conf,
// which is the node's resolver (dnsPolicy Default, podResolvConf). The
// egress proxy's pods resolve the hosts a grant names this way (OF-24);
// plugins never ask it, their NetworkPolicies refuse DNS.
func corefile() string {
	return strings.Join([]string{
		".:" + strconv.Itoa(dnsPort) + " {",
		"    errors",
		"    health :" + strconv.Itoa(dnsHealthPort),
		"    ready :" + strconv.Itoa(dnsReadyPort),
		"    kubernetes " + clusterDomain + " in-addr.arpa {",
		"        pods disabled",
		"        fallthrough in-addr.arpa",
		"        ttl 30",
		"    }",
		"    forward . /etc/resolv.conf",
		"    cache 30",
		"    loop",
		"}",
		"",
	}, "\n")
}

// corednsImage packs the built CoreDNS into an image with the platform's
// image builder (reproducible: every time is the Unix epoch) and pushes it
// to the node's registry; it returns the reference by digest.
func (n *Node) corednsImage(ctx context.Context) (string, error) {
	path := filepath.Join(n.opts.BinDir, corednsBin)
	bin, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("devcluster: %w", err)
	}
	source := corednsModule
	if info, err := buildinfo.ReadFile(path); err == nil {
		for _, d := range info.Deps {
			if d.Path == corednsModule {
				source += "@" + d.Version
			}
		}
	}
	img, err := images.ToolImage(corednsBin, source, bin, time.Unix(0, 0))
	if err != nil {
		return "", fmt.Errorf("devcluster: CoreDNS image: %w", err)
	}
	ref, err := ocisign.Push(ctx, n.regHost, "openfief/coredns", img)
	if err != nil {
		return "", fmt.Errorf("devcluster: pushing CoreDNS: %w", err)
	}
	return ref.String(), nil
}

// startDNS deploys CoreDNS in kube-system (its RBAC, Corefile, Deployment
// and the kube-dns Service at the kubelet's clusterDNS address) and waits
// until it is Available.
func (n *Node) startDNS(ctx context.Context) error {
	cs := n.cp.Clientset
	image, err := n.corednsImage(ctx)
	if err != nil {
		return err
	}
	ns := metav1.NamespaceSystem
	meta := metav1.ObjectMeta{Name: dnsName, Namespace: ns, Labels: dnsLabels}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: dnsRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: dnsRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dnsRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: dnsName, Namespace: ns}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: meta}
	cm := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": corefile()}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterDNSService, Namespace: ns, Labels: dnsLabels},
		Spec: corev1.ServiceSpec{
			ClusterIP: n.net.dns.String(),
			Selector:  dnsLabels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(dnsPort)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(dnsPort)},
			},
		},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: dnsLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dnsLabels},
				Spec:       dnsPodSpec(image),
			},
		},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: CoreDNS's ClusterRole: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: CoreDNS's ClusterRoleBinding: %w", err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: CoreDNS's ServiceAccount: %w", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: CoreDNS's ConfigMap: %w", err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: the %s Service: %w", ClusterDNSService, err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: CoreDNS's Deployment: %w", err)
	}
	return n.waitFor(ctx, "the cluster DNS (CoreDNS) to become Available", func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, dnsName, metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return d.Status.AvailableReplicas >= 1, nil
	})
}

// dnsPodSpec is CoreDNS's pod: what the restricted Pod Security Standard
// admits (non-root, read-only root, no capability, RuntimeDefault seccomp),
// its Corefile from the ConfigMap, the node's own resolver configuration
// (dnsPolicy Default: it never asks itself), and ready when the kubernetes
// plugin has synced.
func dnsPodSpec(image string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:            dnsName,
		DNSPolicy:                     corev1.DNSDefault,
		PriorityClassName:             "system-cluster-critical",
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(dnsUser),
			RunAsGroup:     ptr.To(dnsUser),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			// A safe, namespaced sysctl the kubelet allows: the pod's
			// own network namespace lets any user bind 53 and up.
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: strconv.Itoa(dnsPort)}},
		},
		Containers: []corev1.Container{{
			Name:  dnsName,
			Image: image,
			Args:  []string{"-conf", "/etc/coredns/Corefile"},
			Ports: []corev1.ContainerPort{
				{Name: "dns", ContainerPort: dnsPort, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", ContainerPort: dnsPort, Protocol: corev1.ProtocolTCP},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(dnsReadyPort)}},
				PeriodSeconds: 1,
			},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(dnsHealthPort)}},
				PeriodSeconds:    10,
				FailureThreshold: 5,
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
		Volumes: []corev1.Volume{{
			Name: "config",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: dnsName},
			}},
		}},
	}
}
