//go:build cluster

package operator

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// benchGoMemLimitEnv sets the operator child's GOMEMLIMIT (such as 192MiB,
// or off for none). Unset, the child gets the one deploy/operator gives
// the operator's container, so the benchmark measures the operator as it
// is deployed.
const benchGoMemLimitEnv = "OPENFIEF_BENCH_GOMEMLIMIT"

// childEnv returns env with the child's GOMEMLIMIT in place of any it
// held, and that limit ("" for none).
func childEnv(b *testing.B, env []string) ([]string, string) {
	b.Helper()
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	limit, set := os.LookupEnv(benchGoMemLimitEnv)
	if !set {
		limit = deployedGoMemLimit(b)
	}
	if limit == "" || limit == "off" {
		return env, ""
	}
	return append(env, "GOMEMLIMIT="+limit), limit
}

// deployedGoMemLimit reads the GOMEMLIMIT of the operator's container in
// deploy/operator/deployment.yaml; "" when it sets none.
func deployedGoMemLimit(b *testing.B) string {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.MustRepoRoot(), "deploy", "operator", "deployment.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		b.Fatalf("deploy/operator/deployment.yaml: %v", err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if c.Name == "operator" && e.Name == "GOMEMLIMIT" {
				return e.Value
			}
		}
	}
	return ""
}
