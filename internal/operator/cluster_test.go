package operator

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// svc builds a valid ClusterIP Service for ClusterFromServices tests; edit
// changes it.
func svc(name string, selector map[string]string, edit ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: "10.0.0.10",
			Selector:  selector,
			Ports: []corev1.ServicePort{
				{Name: "connect", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9090, TargetPort: intstr.FromString("metrics")},
			},
		},
	}
	for _, e := range edit {
		e(s)
	}
	return s
}

func TestClusterFromServices(t *testing.T) {
	coreSel := map[string]string{"app.kubernetes.io/name": "openfief-core"}
	proxySel := map[string]string{"app.kubernetes.io/name": "openfief-egress-proxy"}
	proxy := func(edit ...func(*corev1.Service)) *corev1.Service {
		return svc("openfief-egress-proxy", proxySel, append([]func(*corev1.Service){func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.0.0.20"
			s.Spec.Ports = []corev1.ServicePort{{Name: "proxy", Port: 3128, TargetPort: intstr.FromInt32(3129)}}
		}}, edit...)...)
	}
	tests := map[string]struct {
		core, proxy         *corev1.Service
		corePort, proxyPort string
		want                Cluster
		wantErr             error
	}{
		"core and proxy": {
			core: svc("openfief-core", coreSel), proxy: proxy(), corePort: "connect", proxyPort: "proxy",
			want: Cluster{
				Topology:     plugins.Topology{CoreAddress: "10.0.0.10:443", CorePodPort: 8443, ProxyAddress: "10.0.0.20:3128", ProxyPodPort: 3129},
				CoreSelector: coreSel, ProxySelector: proxySel,
			},
		},
		"no proxy": {
			core: svc("openfief-core", coreSel), corePort: "connect",
			want: Cluster{Topology: plugins.Topology{CoreAddress: "10.0.0.10:443", CorePodPort: 8443}, CoreSelector: coreSel},
		},
		"empty port name picks the only port": {
			core: svc("openfief-core", coreSel), proxy: proxy(), corePort: "connect",
			want: Cluster{
				Topology:     plugins.Topology{CoreAddress: "10.0.0.10:443", CorePodPort: 8443, ProxyAddress: "10.0.0.20:3128", ProxyPodPort: 3129},
				CoreSelector: coreSel, ProxySelector: proxySel,
			},
		},
		"unset targetPort is the port": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.IntOrString{} }), corePort: "connect",
			want: Cluster{Topology: plugins.Topology{CoreAddress: "10.0.0.10:443", CorePodPort: 443}, CoreSelector: coreSel},
		},
		"empty string targetPort is the port": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("") }), corePort: "connect",
			want: Cluster{Topology: plugins.Topology{CoreAddress: "10.0.0.10:443", CorePodPort: 443}, CoreSelector: coreSel},
		},
		"IPv6 ClusterIP": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::a" }), corePort: "connect",
			want: Cluster{Topology: plugins.Topology{CoreAddress: "[fd00::a]:443", CorePodPort: 8443}, CoreSelector: coreSel},
		},
		"selector sharing some plugin labels": {
			core:     svc("openfief-core", map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy, plugins.LabelComponent: "core"}),
			corePort: "connect",
			want: Cluster{
				Topology:     plugins.Topology{CoreAddress: "10.0.0.10:443", CorePodPort: 8443},
				CoreSelector: map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy, plugins.LabelComponent: "core"},
			},
		},

		"core missing":          {proxy: proxy(), corePort: "connect", wantErr: ErrServiceMissing},
		"core without selector": {core: svc("openfief-core", nil), corePort: "connect", wantErr: ErrNoSelector},
		"proxy without selector": {
			core: svc("openfief-core", coreSel), proxy: proxy(func(s *corev1.Service) { s.Spec.Selector = nil }), corePort: "connect", wantErr: ErrNoSelector,
		},
		"headless core": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }), corePort: "connect", wantErr: ErrNoClusterIP,
		},
		"ClusterIP not allocated": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.ClusterIP = "" }), corePort: "connect", wantErr: ErrNoClusterIP,
		},
		"ExternalName": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeExternalName
				s.Spec.ExternalName = "core.example.com"
			}), corePort: "connect", wantErr: ErrNoClusterIP,
		},
		"named targetPort": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("grpc") }), corePort: "connect", wantErr: ErrNamedTargetPort,
		},
		"numeric string targetPort is a name": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("8443") }), corePort: "connect", wantErr: ErrNamedTargetPort,
		},
		"named targetPort on the proxy": {
			core: svc("openfief-core", coreSel), proxy: proxy(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }),
			corePort: "connect", wantErr: ErrNamedTargetPort,
		},
		"port not found":            {core: svc("openfief-core", coreSel), corePort: "grpc", wantErr: ErrPortNotFound},
		"ambiguous empty port name": {core: svc("openfief-core", coreSel), wantErr: ErrPortNotFound},
		"UDP port": {
			core: svc("openfief-core", coreSel, func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP }), corePort: "connect", wantErr: ErrPortNotFound,
		},
		"selector equal to plugin labels": {
			core: svc("openfief-core", PodLabels("x")), corePort: "connect", wantErr: ErrSelectorOverlap,
		},
		"selector on managed-by only": {
			core: svc("openfief-core", map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy}), corePort: "connect", wantErr: ErrSelectorOverlap,
		},
		"selector on name and component": {
			core:     svc("openfief-core", map[string]string{plugins.LabelName: plugins.ValuePluginName, plugins.LabelComponent: plugins.ValueComponentPlugin}),
			corePort: "connect", wantErr: ErrSelectorOverlap,
		},
		"selector on a plugin name": {
			core: svc("openfief-core", map[string]string{plugins.LabelPluginName: "core", "app": "core"}), corePort: "connect", wantErr: ErrSelectorOverlap,
		},
		"proxy selector overlaps": {
			core: svc("openfief-core", coreSel), proxy: proxy(func(s *corev1.Service) {
				s.Spec.Selector = map[string]string{plugins.LabelComponent: plugins.ValueComponentPlugin}
			}),
			corePort: "connect", wantErr: ErrSelectorOverlap,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ClusterFromServices(tc.core, tc.proxy, tc.corePort, tc.proxyPort)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Cluster (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClusterFromServicesCompiles: what ClusterFromServices returns is a
// Topology the domain accepts, with and without egress.
func TestClusterFromServicesCompiles(t *testing.T) {
	core := svc("openfief-core", map[string]string{"app": "core"})
	proxy := svc("openfief-egress-proxy", map[string]string{"app": "proxy"}, func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "proxy", Port: 3128}}
	})
	c, err := ClusterFromServices(core, proxy, DefaultCorePort, "")
	if err != nil {
		t.Fatal(err)
	}
	p := plugins.Plugin{
		Name:     "fx",
		Image:    "ghcr.io/example/fx@sha256:" + strings.Repeat("ab", 32),
		Manifest: plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.example.com"}},
	}
	g := plugins.Grant{Name: "fx", Capabilities: p.Manifest.Capabilities, Egress: p.Manifest.Egress}
	e, err := plugins.Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	w, err := plugins.Compile(e, c.Topology)
	if err != nil {
		t.Fatalf("Compile refused the topology: %v", err)
	}
	if len(w.NetworkPolicy.Egress) != 2 {
		t.Errorf("egress rules %v, want the core and the proxy", w.NetworkPolicy.Egress)
	}
}

// TestClusterFromServicesCopiesSelectors: the Cluster never aliases a
// Service's selector map, which belongs to the informer cache.
func TestClusterFromServicesCopiesSelectors(t *testing.T) {
	sel := map[string]string{"app": "core"}
	c, err := ClusterFromServices(svc("openfief-core", sel), nil, DefaultCorePort, "")
	if err != nil {
		t.Fatal(err)
	}
	c.CoreSelector["app"] = "changed"
	if sel["app"] != "core" {
		t.Error("ClusterFromServices returned the Service's own selector map")
	}
}

func TestPodLabelsSatisfyNoAcceptedSelector(t *testing.T) {
	// Every subset of the plugin labels is refused as a selector.
	labels := PodLabels("some-plugin")
	keys := []string{plugins.LabelName, plugins.LabelComponent, plugins.LabelManagedBy, plugins.LabelPluginName}
	for mask := 1; mask < 1<<len(keys); mask++ {
		sel := map[string]string{}
		for i, k := range keys {
			if mask&(1<<i) != 0 {
				sel[k] = labels[k]
			}
		}
		if err := checkSelector(sel); !errors.Is(err, ErrSelectorOverlap) {
			t.Errorf("selector %v: got %v, want ErrSelectorOverlap", sel, err)
		}
	}
}

func TestChangedKeys(t *testing.T) {
	tests := map[string]struct {
		a, b map[string]string
		want []string
	}{
		"same":              {map[string]string{"a": "x"}, map[string]string{"a": "x"}, []string{}},
		"changed value":     {map[string]string{"a": "x", "b": "y"}, map[string]string{"a": "x", "b": "z"}, []string{"b"}},
		"added and removed": {map[string]string{"a": "x"}, map[string]string{"b": ""}, []string{"a", "b"}},
		"from nothing":      {nil, map[string]string{"c": "", "a": ""}, []string{"a", "c"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := changedKeys(tc.a, tc.b); !slices.Equal(got, tc.want) {
				t.Errorf("changedKeys = %v, want %v", got, tc.want)
			}
		})
	}
}
