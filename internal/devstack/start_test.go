//go:build cluster

package devstack

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// planSteps names the steps startPlan chooses for opts by the first words of
// what they print.
func planSteps(opts Options) []string {
	var names []string
	for _, st := range (&Stack{}).startPlan(opts) {
		words := strings.Fields(st.what)
		names = append(names, strings.Join(words[:min(3, len(words))], " "))
	}
	return names
}

func TestStartPlan(t *testing.T) {
	always := func(before, middle []string) []string {
		steps := append([]string{"starting the control", "creating the openfief"}, before...)
		steps = append(steps, "building the nbp-fx", "starting the operator", "starting the egress")
		steps = append(steps, middle...)
		return append(steps, "starting openfief-core (SQLite", "writing /state/env")
	}
	tests := map[string]struct {
		opts Options
		want []string
	}{
		"kwok":                    {Options{Dir: "/state"}, always(nil, nil)},
		"as service accounts":     {Options{Dir: "/state", RunAsServiceAccounts: true}, always([]string{"applying the ServiceAccounts"}, nil)},
		"local plugins":           {Options{Dir: "/state", LocalPlugins: true}, always(nil, []string{"building nbp-fx and"})},
		"real node":               {Options{Dir: "/state", Node: devcluster.NodeReal}, always([]string{"pointing the egress", "standing in for"}, nil)},
		"real node, its resolver": {Options{Dir: "/state", Node: devcluster.NodeReal, ProxyResolver: fixedResolver{}}, always([]string{"pointing the egress"}, nil)},
		"real node, all of them":  {Options{Dir: "/state", Node: devcluster.NodeReal, RunAsServiceAccounts: true, LocalPlugins: true}, always([]string{"pointing the egress", "applying the ServiceAccounts"}, []string{"building nbp-fx and"})},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, planSteps(tt.opts)); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
	// The proxy's step names the stand-ins it starts with local plugins,
	// and only then.
	proxyStep := func(opts Options) string {
		for _, st := range (&Stack{}).startPlan(opts) {
			if strings.HasPrefix(st.what, "starting the egress proxy") {
				return st.what
			}
		}
		return ""
	}
	if what := proxyStep(Options{LocalPlugins: true}); !strings.Contains(what, "api.nbp.pl") || !strings.Contains(what, FakeDAVHost) {
		t.Errorf("local plugins: proxy step %q", what)
	}
	for name, opts := range map[string]Options{"kwok": {}, "the caller's resolver": {LocalPlugins: true, ProxyResolver: fixedResolver{}}} {
		if what := proxyStep(opts); what != "starting the egress proxy" {
			t.Errorf("%s: proxy step %q", name, what)
		}
	}
	// The first step says which node runs the pods.
	if what := (&Stack{}).startPlan(Options{Node: devcluster.NodeReal})[0].what; !strings.Contains(what, "a real node") {
		t.Errorf("real node: first step %q", what)
	}
	if what := (&Stack{}).startPlan(Options{})[0].what; !strings.Contains(what, "kwok") {
		t.Errorf("kwok: first step %q", what)
	}
}

// TestStartFailsAtItsStep: without control-plane binaries Start fails in
// its first step, names that step, prints it as step 1 of 7 and leaves
// nothing running.
func TestStartFailsAtItsStep(t *testing.T) {
	var out bytes.Buffer
	s, err := Start(t.Context(), Options{Dir: t.TempDir(), BinDir: t.TempDir(), Progress: &out})
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded without control-plane binaries")
	}
	if s != nil {
		t.Errorf("Start returned a stack with its error: %+v", s)
	}
	if !strings.HasPrefix(err.Error(), "starting the control plane (") {
		t.Errorf("error %q does not name the step", err)
	}
	if got := out.String(); !strings.HasPrefix(got, "[1/7] starting the control plane") || strings.Contains(got, "[2/7]") || strings.Contains(got, "done in") {
		t.Errorf("progress:\n%s", got)
	}
}

// TestStartKwok starts the whole local platform with kwok's fake nodes and
// checks what each step left behind, then that Stop stops it.
func TestStartKwok(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var out bytes.Buffer
	s, err := Start(ctx, Options{Dir: dir, Progress: &out})
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, out.String())
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
	}()

	// Seven numbered steps, each done.
	steps := regexp.MustCompile(`(?m)^\[(\d)/7\] `).FindAllStringSubmatch(out.String(), -1)
	if len(steps) != 7 || strings.Count(out.String(), "done in") != 7 {
		t.Errorf("want steps 1..7 each done, got:\n%s", out.String())
	}
	for i, m := range steps {
		if m[1] != string(rune('1'+i)) {
			t.Errorf("step %d printed as %s", i+1, m[1])
		}
	}

	// The control plane, with what the namespace step installed.
	cs, err := kubernetes.NewForConfig(s.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, plugins.Namespace, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace: %v", err)
	}
	for _, name := range []string{operator.DefaultCoreService, operator.DefaultProxyService} {
		if _, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Service %s: %v", name, err)
		}
	}
	if raw, err := os.ReadFile(s.KubeconfigPath); err != nil || len(raw) == 0 {
		t.Errorf("kubeconfig %s: %d bytes, %v", s.KubeconfigPath, len(raw), err)
	}

	// The signed registry: its key is in the cluster's signers, which the
	// signers file copies.
	signers, err := os.ReadFile(s.SignersFile)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(plugins.Namespace).Get(ctx, plugins.OwnerSignersConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("trusted signers: %v", err)
	}
	if cm.Data[plugins.OwnerSignersKey] != string(signers) {
		t.Errorf("openfief-trusted-signers holds %q, the file %q", cm.Data[plugins.OwnerSignersKey], signers)
	}
	for _, d := range DemoImages() {
		ref, ok := s.Images[d.Name]
		if !ok || !strings.HasPrefix(ref.String(), s.RegistryHost+"/") {
			t.Errorf("image %s: %v in registry %s", d.Name, ref, s.RegistryHost)
		}
	}
	get := func(url string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("http://" + s.RegistryHost + "/v2/"); err != nil || code != http.StatusOK {
		t.Errorf("registry /v2/: %d, %v", code, err)
	}

	// The egress proxy and the core serve.
	conn, err := net.DialTimeout("tcp", s.ProxyAddress, 5*time.Second)
	if err != nil {
		t.Errorf("egress proxy at %s: %v", s.ProxyAddress, err)
	} else {
		_ = conn.Close()
	}
	if code, err := get(s.CoreURL + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("core %s/healthz: %d, %v", s.CoreURL, code, err)
	}
	// The proxy runs as deployed: its ops endpoints serve, and /metrics
	// counts the GET it refused (CONNECT only) beside the Go and process
	// collectors' metrics.
	if code, err := get("http://" + s.ProxyMetricsAddress + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("egress proxy %s/healthz: %d, %v", s.ProxyMetricsAddress, code, err)
	}
	if code, err := get("http://" + s.ProxyAddress + "/"); err != nil || code != http.StatusMethodNotAllowed {
		t.Errorf("GET on the egress proxy: %d, %v; want 405", code, err)
	}
	metrics := scrape(t, "http://"+s.ProxyMetricsAddress+"/metrics")
	for _, want := range []string{
		`openfief_egress_decisions_total{decision="deny",reason="method_not_allowed"} 1`,
		"openfief_egress_open_tunnels 0",
		"openfief_egress_tunnel_duration_seconds_count 0",
		"go_goroutines",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the egress proxy's /metrics lacks %s", want)
		}
	}

	// The env file names them.
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`export KUBECONFIG="` + s.KubeconfigPath + `"`,
		`export OPENFIEF_CORE_URL="` + s.CoreURL + `"`,
		`export OPENFIEF_EGRESS_PROXY="` + s.ProxyAddress + `"`,
		`export OPENFIEF_REGISTRY="` + s.RegistryHost + `"`,
		`export OPENFIEF_REGISTRY_PUSH="` + s.RegistryHost + `"`,
	} {
		if !strings.Contains(string(env), line+"\n") {
			t.Errorf("env file lacks %s:\n%s", line, env)
		}
	}

	// Stop stops every part.
	s.Stop()
	stopped = true
	if _, err := get(s.CoreURL + "/healthz"); err == nil {
		t.Error("the core still answers after Stop")
	}
	if _, err := get("http://" + s.RegistryHost + "/v2/"); err == nil {
		t.Error("the registry still answers after Stop")
	}
	if _, err := get("http://" + s.ProxyMetricsAddress + "/healthz"); err == nil {
		t.Error("the egress proxy's ops endpoints still answer after Stop")
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, plugins.Namespace, metav1.GetOptions{}); err == nil {
		t.Error("the API server still answers after Stop")
	}
}

// scrape returns the body of a GET of url, failing the test without one.
func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}
