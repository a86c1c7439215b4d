package netpolicy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/test/netpolicy"
)

// Policy names of the platform (buildPlatform).
const (
	fxPolicy          = "plugin-" + pluginName
	defaultDenyPolicy = "openfief-default-deny"
	proxyPolicy       = "openfief-egress-proxy"
	corePolicy        = "openfief-core"
)

// TestTruthTableFails changes the platform's policies the way a regression
// would and checks that the diff names exactly the cells that change: the
// table can fail, and each policy holds the cells it should.
func TestTruthTableFails(t *testing.T) {
	dns := []string{
		"plugin → cluster DNS, TCP", "plugin → cluster DNS, UDP",
		"plugin → resolver on the node, TCP", "plugin → resolver on the node, UDP",
	}
	tests := map[string]struct {
		policies func(platform) []*networkingv1.NetworkPolicy
		// cells are the names the diff must list, sorted; nil means none.
		cells []string
	}{
		"the plugin's policy admits DNS": {
			policies: func(p platform) []*networkingv1.NetworkPolicy {
				np := p.Policies[fxPolicy].DeepCopy()
				np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
					{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
					{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
				}})
				return append(p.Without(fxPolicy), np)
			},
			cells: dns,
		},
		"the plugin's policy admits every pod of the namespace": {
			policies: func(p platform) []*networkingv1.NetworkPolicy {
				np := p.Policies[fxPolicy].DeepCopy()
				np.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
				return append(p.Without(fxPolicy), np)
			},
			cells: []string{"openfief pod (not the core) → plugin"},
		},
		// The operator's policy gone, the pod still there: the default deny
		// is the floor, so the plugin loses even the core and the proxy.
		"the plugin's policy is missing": {
			policies: func(p platform) []*networkingv1.NetworkPolicy { return p.Without(fxPolicy) },
			cells:    []string{"core → plugin serving port", "plugin → core", "plugin → egress proxy"},
		},
		// The operator's policy alone isolates the plugin.
		"the default deny is missing": {
			policies: func(p platform) []*networkingv1.NetworkPolicy { return p.Without(defaultDenyPolicy) },
		},
		"both are missing": {
			policies: func(p platform) []*networkingv1.NetworkPolicy { return p.Without(fxPolicy, defaultDenyPolicy) },
			cells: append(slices.Clone(dns),
				"core look-alike in another namespace → plugin",
				"openfief pod (not the core) → plugin",
				"plugin → API server", "plugin → NBP stand-in, direct", "plugin → internet, direct",
			),
		},
		// The default deny selects every pod in openfief (OF-19): a
		// component without its own policy is cut off, not opened.
		"the egress proxy's policy is missing": {
			policies: func(p platform) []*networkingv1.NetworkPolicy { return p.Without(proxyPolicy) },
			cells: []string{
				"egress proxy → API server", "egress proxy → a pod in another namespace, TCP 443",
				"egress proxy → cluster DNS, TCP", "egress proxy → cluster DNS, UDP",
				"egress proxy → internet, HTTPS", "plugin → egress proxy",
			},
		},
		"the core's policy is missing": {
			policies: func(p platform) []*networkingv1.NetworkPolicy { return p.Without(corePolicy) },
			cells: []string{
				"API server → core owner port",
				"core → other plugin serving port", "core → plugin serving port",
				"other plugin → core", "plugin → core",
			},
		},
	}
	p := buildPlatform(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := netpolicy.Compute(p.World, tc.policies(p))
			if err != nil {
				t.Fatal(err)
			}
			diff := netpolicy.Expected(p.World.Ports).Diff(got)
			var cells []string
			for _, d := range diff {
				name, _, _ := strings.Cut(strings.TrimPrefix(d, `cell "`), `"`)
				cells = append(cells, name)
			}
			slices.Sort(cells)
			want := slices.Sorted(slices.Values(tc.cells))
			if d := cmp.Diff(want, cells); d != "" {
				t.Errorf("cells named by the diff (-want +got):\n%s\ndiff:\n%s", d, strings.Join(diff, "\n"))
			}
		})
	}
}

// TestComputeFailsClosed: input the engine cannot judge is an error, never a
// table.
func TestComputeFailsClosed(t *testing.T) {
	p := buildPlatform(t)
	tests := map[string]func() (netpolicy.World, []*networkingv1.NetworkPolicy){
		"a policy without policyTypes": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			np := p.Policies[fxPolicy].DeepCopy()
			np.Spec.PolicyTypes = nil
			return p.World, append(p.Without(fxPolicy), np)
		},
		"a policy without a namespace": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			np := p.Policies[fxPolicy].DeepCopy()
			np.Namespace = ""
			return p.World, append(p.Without(fxPolicy), np)
		},
		"a peer with ipBlock and a selector": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			np := p.Policies[fxPolicy].DeepCopy()
			np.Spec.Egress[0].To[0].IPBlock = &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}
			return p.World, append(p.Without(fxPolicy), np)
		},
		"an empty peer": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			np := p.Policies[fxPolicy].DeepCopy()
			np.Spec.Egress[0].To = append(np.Spec.Egress[0].To, networkingv1.NetworkPolicyPeer{})
			return p.World, append(p.Without(fxPolicy), np)
		},
		"a port range that ends before it starts (the engine panics)": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			np := p.Policies[fxPolicy].DeepCopy()
			np.Spec.Egress[0].Ports[0].EndPort = ptr.To[int32](1)
			return p.World, append(p.Without(fxPolicy), np)
		},
		"a named port": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			np := p.Policies[fxPolicy].DeepCopy()
			np.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromString("connect"))
			return p.World, append(p.Without(fxPolicy), np)
		},
		"a role missing from the world": func() (netpolicy.World, []*networkingv1.NetworkPolicy) {
			w := netpolicy.World{Peers: map[netpolicy.Role]netpolicy.Peer{}, Ports: p.World.Ports}
			for r, peer := range p.World.Peers {
				if r != netpolicy.ClusterDNS {
					w.Peers[r] = peer
				}
			}
			return w, p.List()
		},
	}
	for name, input := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := netpolicy.Compute(input())
			if !errors.Is(err, netpolicy.ErrInvalid) || got != nil {
				t.Fatalf("Compute = %d rows, %v; want no table and ErrInvalid", len(got), err)
			}
			t.Log(err)
		})
	}
}
