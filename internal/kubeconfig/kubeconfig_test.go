package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// twoClusters is a kubeconfig with two contexts, "one" the current one.
const twoClusters = `apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://one.example:6443"}
- name: two
  cluster: {server: "https://two.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: one
  context: {cluster: one, user: u}
- name: two
  context: {cluster: two, user: u}
current-context: one
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(twoClusters), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// outsideAnyCluster hides the pod environment and the user's files, so
// only what a test names is found.
func outsideAnyCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
}

func TestForServer(t *testing.T) {
	outsideAnyCluster(t)
	path := writeKubeconfig(t)
	cfg, err := ForServer(path)
	if err != nil || cfg.Host != "https://one.example:6443" {
		t.Errorf("ForServer(%s): %v, %v", path, cfg, err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := ForServer(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("ForServer of a missing file: %v, want an error naming it", err)
	}
	// Empty is the in-cluster configuration only: no $KUBECONFIG, no
	// ~/.kube/config.
	t.Setenv("KUBECONFIG", path)
	if _, err := ForServer(""); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf(`ForServer("") outside a cluster: %v, want an error naming --kubeconfig`, err)
	}
}

func TestLikeKubectl(t *testing.T) {
	outsideAnyCluster(t)
	path := writeKubeconfig(t)
	tests := map[string]struct {
		path, context, env string
		want               string
	}{
		"the file, its current context": {path: path, want: "https://one.example:6443"},
		"the file, another context":     {path: path, context: "two", want: "https://two.example:6443"},
		"$KUBECONFIG":                   {env: path, want: "https://one.example:6443"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			cfg, err := LikeKubectl(tt.path, tt.context)
			if err != nil || cfg.Host != tt.want {
				t.Errorf("LikeKubectl(%q, %q): %v, %v; want host %s", tt.path, tt.context, cfg, err, tt.want)
			}
		})
	}
	if _, err := LikeKubectl(path, "three"); err == nil {
		t.Error("an unknown context: no error")
	}
	t.Setenv("KUBECONFIG", "")
	if _, err := LikeKubectl("", ""); err == nil {
		t.Error("nothing to load outside a cluster: no error")
	}
}
