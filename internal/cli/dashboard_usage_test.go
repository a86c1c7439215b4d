package cli

import "testing"

// TestDashboardCommandRefusesBadPort: a port out of range is a usage error.
func TestDashboardCommandRefusesBadPort(t *testing.T) {
	r := openfief(t, nil, runOpts{}, "dashboard", "--port", "70000", "--no-browser")
	expect(t, r, ExitUsage, "--port 70000")
}

// TestApproveCommand names the cluster and namespace the command ran
// against, quoted for a shell.
func TestApproveCommand(t *testing.T) {
	for name, tc := range map[string]struct {
		kubeconfig, context, namespace string
		want                           string
	}{
		"defaults":   {"", "", DefaultNamespace, "openfief plugin approve fx"},
		"all flags":  {"/tmp/k.yaml", "dev", "other", "openfief plugin approve fx --kubeconfig /tmp/k.yaml --context dev -n other"},
		"shell text": {"/tmp/my dir/it's", "", DefaultNamespace, `openfief plugin approve fx --kubeconfig '/tmp/my dir/it'\''s'`},
	} {
		t.Run(name, func(t *testing.T) {
			env := NewEnv(Streams{})
			env.Kubeconfig, env.Context, env.Namespace = tc.kubeconfig, tc.context, tc.namespace
			if got := env.ApproveCommand("fx"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPurgeDataCommand names the cluster, namespace and core the dashboard
// ran against, and quotes a key that is no instance key.
func TestPurgeDataCommand(t *testing.T) {
	t.Setenv(EnvCoreURL, "http://core.example:8081")
	for name, tc := range map[string]struct {
		namespace, key, coreURL string
		want                    string
	}{
		"defaults":        {DefaultNamespace, "nbp-fx~0a1b2c3d", "", "openfief plugin purge-data nbp-fx~0a1b2c3d"},
		"the env's core":  {DefaultNamespace, "nbp-fx~0a1b2c3d", "http://core.example:8081", "openfief plugin purge-data nbp-fx~0a1b2c3d"},
		"another core":    {"other", "nbp-fx~0a1b2c3d", "http://127.0.0.1:9/", "openfief plugin purge-data nbp-fx~0a1b2c3d -n other --core-url http://127.0.0.1:9/"},
		"not a key":       {DefaultNamespace, "x;rm -rf ~", "", `openfief plugin purge-data 'x;rm -rf ~'`},
		"a leading tilde": {DefaultNamespace, "~root", "", `openfief plugin purge-data '~root'`},
	} {
		t.Run(name, func(t *testing.T) {
			env := NewEnv(Streams{})
			env.Namespace = tc.namespace
			if got := env.PurgeDataCommand(tc.key, tc.coreURL); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
