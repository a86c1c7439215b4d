package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// externalMetrics are the series the rules read that neither the core nor
// the operator exports: the kubelet's volume statistics and Prometheus'
// own up. The core's and the operator's tests check the openfief_ ones
// against what they export.
var externalMetrics = []string{"kubelet_volume_stats_available_bytes", "kubelet_volume_stats_capacity_bytes", "up"}

// TestMonitoringRules: every alert of deploy/monitoring waits a while
// (for), has a severity, a summary and a description naming a command to
// run, reads only metrics the core or the operator export or the external
// ones, and has promtool cases in prometheusrule_test.yaml both firing and
// not firing.
func TestMonitoringRules(t *testing.T) {
	rules, err := testutil.Rules()
	if err != nil {
		t.Fatal(err)
	}
	cases := promtoolCases(t)
	alerts := 0
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		alerts++
		if r.For == "" {
			t.Errorf("%s: no for: a single scrape would page", r.Alert)
		}
		if !slices.Contains([]string{"info", "warning", "critical"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["description"], "`openfief ") {
			t.Errorf("%s: a summary and a description naming the openfief command to run are required: %v", r.Alert, r.Annotations)
		}
		for _, n := range testutil.MetricNames(r.Expr) {
			if !strings.HasPrefix(n, "openfief_core_") && !strings.HasPrefix(n, "openfief_operator_") && !slices.Contains(externalMetrics, n) {
				t.Errorf("%s reads %s, which nothing of OpenFief exports and the tests do not know", r.Alert, n)
			}
		}
		if c := cases[r.Alert]; !c.firing || !c.silent {
			t.Errorf("%s: prometheusrule_test.yaml has a firing case %v and a silent one %v, want both", r.Alert, c.firing, c.silent)
		}
		delete(cases, r.Alert)
	}
	if alerts == 0 {
		t.Fatal("no alert")
	}
	for name := range cases {
		t.Errorf("prometheusrule_test.yaml tests %s, which is no alert", name)
	}
}

type promtoolCase struct{ firing, silent bool }

// promtoolCases reads which alerts prometheusrule_test.yaml expects to fire
// and to be silent.
func promtoolCases(t *testing.T) map[string]promtoolCase {
	t.Helper()
	raw, err := os.ReadFile("monitoring/prometheusrule_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]promtoolCase{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			c := out[a.Alertname]
			if len(a.ExpAlerts) == 0 {
				c.silent = true
			} else {
				c.firing = true
			}
			out[a.Alertname] = c
		}
	}
	return out
}

// TestMonitoringReachesOnlyMetricsPorts: deploy/monitoring's Services and
// NetworkPolicies lead to the ports the core and the operator serve their
// metrics on (the flags of their Deployments), and to nothing else: the
// core's plugin API port stays closed to the scraper; and without it the
// metrics ports admit no one.
func TestMonitoringReachesOnlyMetricsPorts(t *testing.T) {
	objs, err := Render("monitoring")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{
		"openfief-core":     metricsPort(t, "core", "openfief-core", "--metrics-listen=:"),
		"openfief-operator": metricsPort(t, "operator", "openfief-operator", "--metrics-bind-address=:"),
	}
	seen := map[string]int{}
	for _, u := range objs {
		if u.GetNamespace() != "openfief" {
			t.Errorf("%s/%s in namespace %q", u.GetKind(), u.GetName(), u.GetNamespace())
		}
		switch u.GetKind() {
		case "Service":
			var s struct {
				Spec struct {
					Selector map[string]string `json:"selector"`
					Ports    []struct {
						Name       string             `json:"name"`
						TargetPort intstr.IntOrString `json:"targetPort"`
					} `json:"ports"`
				} `json:"spec"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				t.Fatal(err)
			}
			app := s.Spec.Selector["app.kubernetes.io/name"]
			if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "metrics" || s.Spec.Ports[0].TargetPort.IntVal != want[app] {
				t.Errorf("Service %s: ports %+v, want only metrics to %s's %d", u.GetName(), s.Spec.Ports, app, want[app])
			}
			seen["Service "+app]++
		case "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
				t.Fatal(err)
			}
			app := np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]
			for _, in := range np.Spec.Ingress {
				if len(in.From) == 0 {
					t.Errorf("NetworkPolicy %s admits any peer", u.GetName())
				}
				for _, p := range in.Ports {
					if p.Port == nil || p.Port.IntVal != want[app] {
						t.Errorf("NetworkPolicy %s opens %v of %s, want only its metrics port %d", u.GetName(), p.Port, app, want[app])
					}
				}
			}
			seen["NetworkPolicy "+app]++
		}
	}
	for _, k := range []string{"Service openfief-core", "Service openfief-operator", "NetworkPolicy openfief-core", "NetworkPolicy openfief-operator"} {
		if seen[k] != 1 {
			t.Errorf("%d of %s, want 1", seen[k], k)
		}
	}
	// Without deploy/monitoring no one reaches a metrics port: the core's
	// and the operator's own policies admit no peer to it.
	for _, dir := range []string{"core", "operator"} {
		objs, err := Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() != "NetworkPolicy" {
				continue
			}
			var np networkingv1.NetworkPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
				t.Fatal(err)
			}
			port := want[np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]]
			for _, in := range np.Spec.Ingress {
				if len(in.Ports) == 0 && port != 0 {
					t.Errorf("deploy/%s: NetworkPolicy %s admits %v to every port, the metrics port %d too", dir, np.Name, in.From, port)
				}
				for _, p := range in.Ports {
					if p.Port != nil && p.Port.IntVal == port {
						t.Errorf("deploy/%s: NetworkPolicy %s admits %v to the metrics port %d", dir, np.Name, in.From, port)
					}
				}
			}
		}
	}
}

// metricsPort is the port a Deployment of dir serves metrics on: its flag
// with the prefix given, and a container port named metrics with the same
// number.
func metricsPort(t *testing.T, dir, name, flag string) int32 {
	t.Helper()
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != name {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		var port int32
		for _, p := range c.Ports {
			if p.Name == "metrics" {
				port = p.ContainerPort
			}
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, flag); ok && port != 0 && v == strconv.Itoa(int(port)) {
				return port
			}
		}
		t.Fatalf("%s: no %s matching a container port named metrics (%d): %v", name, flag, port, c.Args)
	}
	t.Fatalf("%s renders no Deployment %s", dir, name)
	return 0
}

// rulesFileFor writes the PrometheusRule's spec as a Prometheus rule file
// (its groups) into dir, as rules.yaml, beside a copy of
// prometheusrule_test.yaml, and returns the copy's path.
func rulesFileFor(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile("monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("monitoring/prometheusrule_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prometheusrule_test.yaml")
	if err := os.WriteFile(path, tests, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
