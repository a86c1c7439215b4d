package netpolicy_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/test/netpolicy"
)

// repo is the repository root, seen from this package's directory.
const repo = "../.."

// platform is what the cluster would hold: every NetworkPolicy, and the
// pods and addresses of the truth table with the labels the real objects
// carry.
type platform struct {
	// Policies are, by name: the operator's policy of each plugin, then the
	// install manifests' (deploy/operator, deploy/egress-proxy, deploy/core).
	Policies map[string]*networkingv1.NetworkPolicy
	World    netpolicy.World
}

// List returns the policies sorted by name.
func (p platform) List() []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, name := range sortedKeys(p.Policies) {
		out = append(out, p.Policies[name])
	}
	return out
}

// Without returns the policies but the ones named.
func (p platform) Without(names ...string) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, np := range p.List() {
		keep := true
		for _, n := range names {
			keep = keep && np.Name != n
		}
		if keep {
			out = append(out, np)
		}
	}
	return out
}

// Names of the two plugin instances and of their policies.
const (
	pluginName      = "fx"
	otherPluginName = "other"
)

// buildPlatform renders deploy/operator, deploy/egress-proxy and deploy/core,
// reads the proxy's and the core's Services from them, and compiles two
// plugins with the operator's own code: fx from plugins/nbp-fx/manifest.json
// with its egress granted, and other, a connector granted no egress.
func buildPlatform(t *testing.T) platform {
	t.Helper()
	operatorObjs := render(t, "deploy/operator")
	proxyObjs := render(t, "deploy/egress-proxy")
	coreObjs := render(t, "deploy/core")

	var proxySvc corev1.Service
	convert(t, find(t, proxyObjs, "Service", operator.DefaultProxyService), &proxySvc)
	proxySvc.Spec.ClusterIP = "10.96.0.20" // the API server would allocate it
	var core corev1.Service
	convert(t, find(t, coreObjs, "Service", operator.DefaultCoreService), &core)
	core.Spec.ClusterIP = "10.96.0.30"
	cluster, err := operator.ClusterFromServices(&core, &proxySvc, operator.DefaultCorePort, operator.DefaultProxyPort)
	if err != nil {
		t.Fatalf("ClusterFromServices: %v", err)
	}

	var manifest v1alpha1.Manifest
	raw, err := os.ReadFile(filepath.Join(repo, "plugins/nbp-fx/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatalf("nbp-fx manifest: %v", err)
	}
	fx := testutil.MakePlugin(pluginName, testutil.Image("nbp-fx")).Obj()
	fx.Spec.Manifest = manifest
	other := testutil.MakePlugin(otherPluginName, testutil.Image("other")).Obj()
	fxObjs := compile(t, fx, cluster)
	otherObjs := compile(t, other, cluster)
	if len(fxObjs.NetworkPolicy.Spec.Egress) < 2 || len(otherObjs.NetworkPolicy.Spec.Egress) != 1 {
		t.Fatalf("fx should have egress to the core and the proxy, other to the core only: %d, %d rules",
			len(fxObjs.NetworkPolicy.Spec.Egress), len(otherObjs.NetworkPolicy.Spec.Egress))
	}

	p := platform{Policies: map[string]*networkingv1.NetworkPolicy{}}
	for _, np := range append([]*networkingv1.NetworkPolicy{fxObjs.NetworkPolicy, otherObjs.NetworkPolicy}, policies(t, operatorObjs, proxyObjs, coreObjs)...) {
		if _, dup := p.Policies[np.Name]; dup {
			t.Fatalf("two NetworkPolicies named %s", np.Name)
		}
		p.Policies[np.Name] = np
	}

	openfief := namespace(t)
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{corev1.LabelMetadataName: "kube-system"}}}
	elsewhere := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "household", Labels: map[string]string{corev1.LabelMetadataName: "household"}}}
	pod := func(ns *corev1.Namespace, labels map[string]string, ip string) netpolicy.Peer {
		return netpolicy.PodPeer(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Labels: labels},
			Status:     corev1.PodStatus{PodIP: ip},
		}, ns)
	}
	p.World = netpolicy.World{
		Peers: map[netpolicy.Role]netpolicy.Peer{
			netpolicy.Plugin:        pod(openfief, fxObjs.Deployment.Spec.Template.Labels, "10.244.0.11"),
			netpolicy.OtherPlugin:   pod(openfief, otherObjs.Deployment.Spec.Template.Labels, "10.244.0.12"),
			netpolicy.Core:          pod(openfief, templateLabels(t, coreObjs, "openfief-core"), "10.244.0.13"),
			netpolicy.EgressProxy:   pod(openfief, templateLabels(t, proxyObjs, "openfief-egress-proxy"), "10.244.0.14"),
			netpolicy.NamespacePod:  pod(openfief, templateLabels(t, operatorObjs, "openfief-operator"), "10.244.0.15"),
			netpolicy.CoreLookalike: pod(elsewhere, cluster.CoreSelector, "10.244.0.16"),
			netpolicy.ClusterDNS:    pod(kubeSystem, map[string]string{"k8s-app": "kube-dns"}, "10.244.0.17"),
			// The bridge's gateway, where a test runs a resolver on the node.
			netpolicy.NodeResolver: netpolicy.AddressPeer("10.244.0.1"),
			// The API server at the address deploy/core's policy names as
			// committed (the placeholder the install replaces with the
			// cluster's): the owner port is open to it alone.
			netpolicy.APIServer: netpolicy.AddressPeer(strings.TrimSuffix(deploy.APIServerPlaceholder, "/32")),
			// A private address on the node, as the real-node test has it.
			netpolicy.NBPStandIn: netpolicy.AddressPeer("172.18.0.2"),
			netpolicy.Internet:   netpolicy.AddressPeer("203.0.113.10"),
		},
		Ports: netpolicy.Ports{
			Plugin:     int(fxObjs.Deployment.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort),
			Core:       cluster.Topology.CorePodPort,
			CoreOwner:  ownerPort(t, &core),
			Proxy:      cluster.Topology.ProxyPodPort,
			APIServer:  6443,
			NBPStandIn: 8443,
		},
	}
	return p
}

// ownerPort is the pod port of the core Service's port named owner.
func ownerPort(t *testing.T, core *corev1.Service) int {
	t.Helper()
	for _, p := range core.Spec.Ports {
		if p.Name == "owner" && p.TargetPort.IntValue() > 0 {
			return p.TargetPort.IntValue()
		}
	}
	t.Fatalf("Service %s has no port named owner with a numeric targetPort", core.Name)
	return 0
}

// compile runs p, granted exactly what it asks for, through the operator's
// steps: Effective, Compile, BuildObjects.
func compile(t *testing.T, p *v1alpha1.Plugin, c operator.Cluster) operator.Objects {
	t.Helper()
	e, err := plugins.Effective(apiconv.PluginFromAPI(p), apiconv.GrantFromAPI(testutil.GrantFor(p).Obj()))
	if err != nil {
		t.Fatalf("plugin %s: %v", p.Name, err)
	}
	w, err := plugins.Compile(e, c.Topology)
	if err != nil {
		t.Fatalf("plugin %s: %v", p.Name, err)
	}
	return operator.BuildObjects(p, p.Spec.Image, nil, w, c)
}

// render builds one kustomization of the repository with deploy.Render.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := deploy.Render(filepath.Join(repo, dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// policies are the NetworkPolicies of rendered manifests.
func policies(t *testing.T, rendered ...[]*unstructured.Unstructured) []*networkingv1.NetworkPolicy {
	t.Helper()
	var out []*networkingv1.NetworkPolicy
	for _, objs := range rendered {
		nps, err := netpolicy.Policies(objs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, nps...)
	}
	return out
}

// find returns the rendered object of kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered manifests", kind, name)
	return nil
}

// convert turns a rendered object into its typed form, refusing unknown fields.
func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// templateLabels are the pod labels of the rendered Deployment name.
func templateLabels(t *testing.T, objs []*unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", name), &d)
	return d.Spec.Template.Labels
}

// namespace is deploy/crds/namespace.yaml with the name label the API
// server adds to every namespace.
func namespace(t *testing.T) *corev1.Namespace {
	t.Helper()
	var ns corev1.Namespace
	if err := yaml.UnmarshalStrict(deploy.Namespace(), &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
	return &ns
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestStrippedPluginPodIsIsolated: a plugin pod whose labels were all
// removed (if the admission policy did not refuse it)
// is selected by no policy of its plugin, only by openfief-default-deny,
// which selects every pod in openfief (OF-19): every cell into or out of it
// is refused, the core's and the proxy's included.
func TestStrippedPluginPodIsIsolated(t *testing.T) {
	p := buildPlatform(t)
	stripped := p.Peers()
	pl := stripped[netpolicy.Plugin]
	pl.PodLabels = map[string]string{}
	stripped[netpolicy.Plugin] = pl
	w := netpolicy.World{Peers: stripped, Ports: p.World.Ports}
	got, err := netpolicy.Compute(w, p.List())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with the plugin pod's labels removed:\n%s", got)
	n := 0
	for _, r := range got {
		if r.Cell.From != netpolicy.Plugin && r.Cell.To != netpolicy.Plugin {
			continue
		}
		n++
		if r.Verdict != netpolicy.Refused {
			t.Errorf("cell %q (%s) is %s, want refused: the stripped pod escaped the default deny", r.Cell.Name, r.Cell, r.Verdict)
		}
	}
	if n == 0 {
		t.Fatal("no cell from or to the plugin")
	}
}

// Peers returns a copy of the world's peers.
func (p platform) Peers() map[netpolicy.Role]netpolicy.Peer {
	return maps.Clone(p.World.Peers)
}
