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
