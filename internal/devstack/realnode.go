package devstack

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// ProxyOnNodePolicy is the NetworkPolicy that, with a real node, lets plugin
// pods reach the in-process egress proxy on the node's bridge address: the
// operator's own policy allows the proxy's pods, and here the proxy is not a
// pod. It allows exactly that address and port, nothing else.
const ProxyOnNodePolicy = "openfief-dev-egress-proxy-on-node"

// startTimeout bounds each start step of the control plane: a real node also
// waits for the machine's node lock (another real node, a test, may hold it).
func startTimeout(node devcluster.NodeKind) time.Duration {
	if node == devcluster.NodeReal {
		return 5 * time.Minute
	}
	return 0
}

// proxyListenAddress is where the in-process egress proxy listens: loopback,
// or with a real node its bridge address, which the plugin pods can route to,
// on the proxy pods' port.
func (s *Stack) proxyListenAddress(opts Options) string {
	if opts.Node == devcluster.NodeReal {
		return net.JoinHostPort(s.Cluster.NodeGateway().String(), strconv.Itoa(proxyPodPort))
	}
	return "127.0.0.1:0"
}

// installProxyOnNode gives the egress proxy's Service (whose selector
// matches no pod) an EndpointSlice of its own naming the node's bridge
// address, where the proxy will listen, so kube-proxy sends the plugins'
// traffic to the proxy's ClusterIP there; and applies ProxyOnNodePolicy.
func (s *Stack) installProxyOnNode(ctx context.Context, client kubernetes.Interface) error {
	gw := s.Cluster.NodeGateway().String()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      operator.DefaultProxyService + "-on-node",
			Namespace: plugins.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: operator.DefaultProxyService,
				discoveryv1.LabelManagedBy:   "openfief-devstack",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{gw}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To(operator.DefaultProxyPort), Port: ptr.To[int32](proxyPodPort), Protocol: ptr.To(corev1.ProtocolTCP),
		}},
	}
	if _, err := client.DiscoveryV1().EndpointSlices(plugins.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(proxyPodPort)
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ProxyOnNodePolicy, Namespace: plugins.Namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				plugins.LabelComponent: plugins.ValueComponentPlugin,
				plugins.LabelManagedBy: plugins.ValueManagedBy,
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: gw + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if _, err := client.NetworkingV1().NetworkPolicies(plugins.Namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// startNodeStandIns, with a real node, serves the NBP stand-in and the
// WebDAV stand-in each at a stand-in address of the node's bridge
// (devcluster's StandInAddress: public unicast, which the egress proxy's
// address policy lets through), on port 443, as the in-cluster mode does;
// and has the in-process egress proxy resolve api.nbp.pl and FakeDAVHost
// to them, any other name as this machine does. A plugin pod thus reaches
// its institution's stand-in only through the proxy, as it would the
// institution; the demo images trust the stand-ins' CAs
// (startSignedRegistry).
func (s *Stack) startNodeStandIns(_ context.Context, opts *Options) error {
	nbpAddr, err := s.Cluster.StandInAddress()
	if err != nil {
		return err
	}
	nbp, err := StartFakeNBP(net.JoinHostPort(nbpAddr.String(), "443"))
	if err != nil {
		return err
	}
	s.stops = append(s.stops, nbp.Close)
	s.FakeNBP = nbp
	davAddr, err := s.Cluster.StandInAddress()
	if err != nil {
		return err
	}
	dav, err := StartFakeDAV(net.JoinHostPort(davAddr.String(), "443"), filepath.Join(opts.Dir, "webdav"))
	if err != nil {
		return err
	}
	s.stops = append(s.stops, dav.Close)
	s.FakeDAV = dav
	standIns, dialer, err := standInRoutes(nbp.route(), dav.route())
	if err != nil {
		return err
	}
	opts.ProxyResolver, opts.ProxyDialer = standInsFirst{standIns: standIns, next: net.DefaultResolver}, dialer
	return nil
}

// standInsFirst answers the stand-ins' names from its table and asks next
// for every other name.
type standInsFirst struct {
	standIns fixedResolver
	next     egress.Resolver
}

func (r standInsFirst) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if addrs, err := r.standIns.LookupNetIP(ctx, network, host); err == nil {
		return addrs, nil
	}
	return r.next.LookupNetIP(ctx, network, host)
}
