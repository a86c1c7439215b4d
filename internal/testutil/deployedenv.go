package testutil

import (
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// DeployedEnv returns the value the Deployment in file (a path from the
// repository's root, such as deploy/core/deployment.yaml) gives the
// variable name in its container, "" when it sets none; benchmarks read the
// soft memory limit (GOMEMLIMIT) the platform runs its binaries under.
func DeployedEnv(t testing.TB, file, container, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(MustRepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}
