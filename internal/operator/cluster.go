package operator

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Errors of ClusterFromServices. The operator reports any of them as
// ClusterUnavailable on the plugins that would run.
var (
	// ErrServiceMissing: the core's Service does not exist.
	ErrServiceMissing = errors.New("service missing")
	// ErrNoSelector: the Service selects no pods, so its pods can't be a
	// NetworkPolicy peer.
	ErrNoSelector = errors.New("service has no selector")
	// ErrNoClusterIP: the Service is headless, ExternalName or not yet
	// allocated; plugins have no DNS and need an address (D-32).
	ErrNoClusterIP = errors.New("service has no ClusterIP")
	// ErrPortNotFound: the Service has no TCP port of the name asked for.
	ErrPortNotFound = errors.New("service port not found")
	// ErrNamedTargetPort: the port's targetPort is a name; NetworkPolicy
	// matches pod port numbers, which a name does not give.
	ErrNamedTargetPort = errors.New("named targetPort refused")
	// ErrSelectorOverlap: the selector would also match plugin pods, which
	// would let a plugin pass for the core or the proxy (D-59).
	ErrSelectorOverlap = errors.New("selector would match plugin pods")
)

// Cluster is where the core and the egress proxy run: the domain's Topology
// (addresses and pod ports, D-32) plus the Services' selectors, which pick
// the NetworkPolicy peers (D-59).
type Cluster struct {
	// Topology holds the core's and, if known, the proxy's ClusterIP:port
	// and pod port. CoreSubject and PluginPort are left for the caller.
	Topology plugins.Topology
	// CoreSelector selects the core's pods.
	CoreSelector map[string]string
	// ProxySelector selects the egress proxy's pods; nil without a proxy.
	ProxySelector map[string]string
	// Gate is the isolation gate every plugin pod starts with (OF-42).
	Gate IsolationGate
}

// ClusterFromServices reads the core's Service and, if not nil, the egress
// proxy's Service into a Cluster (D-32, D-59). corePort and proxyPort name
// the Service port to use; an empty name picks a Service's only port.
//
// Each Service needs a selector that no plugin pod can satisfy
// (ErrSelectorOverlap), a ClusterIP (not headless), and a TCP port whose
// targetPort is a number or unset (ErrNamedTargetPort): NetworkPolicy
// matches pod port numbers. A nil core Service is ErrServiceMissing. A nil
// proxy leaves the proxy's fields empty, so only plugins without egress can
// compile.
func ClusterFromServices(core, proxy *corev1.Service, corePort, proxyPort string) (Cluster, error) {
	if core == nil {
		return Cluster{}, fmt.Errorf("core service: %w", ErrServiceMissing)
	}
	var c Cluster
	addr, podPort, sel, err := readService(core, corePort)
	if err != nil {
		return Cluster{}, fmt.Errorf("core service %s: %w", core.Name, err)
	}
	c.Topology.CoreAddress, c.Topology.CorePodPort, c.CoreSelector = addr, podPort, sel
	if proxy != nil {
		addr, podPort, sel, err := readService(proxy, proxyPort)
		if err != nil {
			return Cluster{}, fmt.Errorf("egress proxy service %s: %w", proxy.Name, err)
		}
		c.Topology.ProxyAddress, c.Topology.ProxyPodPort, c.ProxySelector = addr, podPort, sel
	}
	return c, nil
}

// readService returns a Service's ClusterIP:port, its pod port and a copy of
// its selector.
func readService(s *corev1.Service, portName string) (address string, podPort int, selector map[string]string, err error) {
	if len(s.Spec.Selector) == 0 {
		return "", 0, nil, ErrNoSelector
	}
	if err := checkSelector(s.Spec.Selector); err != nil {
		return "", 0, nil, err
	}
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err != nil || s.Spec.Type == corev1.ServiceTypeExternalName || ip.Zone() != "" || ip.IsUnspecified() {
		return "", 0, nil, fmt.Errorf("%w: %q", ErrNoClusterIP, s.Spec.ClusterIP)
	}
	port, err := findPort(s.Spec.Ports, portName)
	if err != nil {
		return "", 0, nil, err
	}
	if port.Port < 1 || port.Port > 65535 {
		return "", 0, nil, fmt.Errorf("%w: port %q is %d", ErrPortNotFound, port.Name, port.Port)
	}
	podPort, err = targetPort(port)
	if err != nil {
		return "", 0, nil, err
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port.Port)).String(), podPort, maps.Clone(s.Spec.Selector), nil
}

// findPort returns the TCP port named name, or the only port when name is
// empty.
func findPort(ports []corev1.ServicePort, name string) (corev1.ServicePort, error) {
	var found []corev1.ServicePort
	for _, p := range ports {
		if name == "" || p.Name == name {
			found = append(found, p)
		}
	}
	switch {
	case len(found) == 0:
		return corev1.ServicePort{}, fmt.Errorf("%w: no port named %q", ErrPortNotFound, name)
	case len(found) > 1:
		return corev1.ServicePort{}, fmt.Errorf("%w: %d ports and no port name given", ErrPortNotFound, len(found))
	}
	if p := found[0].Protocol; p != "" && p != corev1.ProtocolTCP {
		return corev1.ServicePort{}, fmt.Errorf("%w: port %q is %s, not TCP", ErrPortNotFound, found[0].Name, p)
	}
	return found[0], nil
}

// targetPort is the pod port a Service port forwards to: its targetPort
// number, or its port when targetPort is unset. A name is refused.
func targetPort(p corev1.ServicePort) (int, error) {
	t := p.TargetPort
	switch {
	case t.Type == intstr.String && t.StrVal != "":
		return 0, fmt.Errorf("%w: port %q targets %q; use the container port number", ErrNamedTargetPort, p.Name, t.StrVal)
	case t.Type == intstr.String || t.IntVal == 0:
		return int(p.Port), nil
	case t.IntVal < 1 || t.IntVal > 65535:
		return 0, fmt.Errorf("%w: port %q targets %d", ErrPortNotFound, p.Name, t.IntVal)
	}
	return int(t.IntVal), nil
}

// checkSelector refuses a selector that selects on plugins.LabelPluginName at all, or
// whose every label the plugin pod labels satisfy: either way some plugin's
// pods would be NetworkPolicy peers in the core's or the proxy's place.
func checkSelector(sel map[string]string) error {
	if _, ok := sel[plugins.LabelPluginName]; ok {
		return fmt.Errorf("%w: it selects on %s", ErrSelectorOverlap, plugins.LabelPluginName)
	}
	plugin := PodLabels("")
	for k, v := range sel {
		if pv, ok := plugin[k]; !ok || pv != v {
			return nil
		}
	}
	return fmt.Errorf("%w: plugin pods carry every label it selects", ErrSelectorOverlap)
}
