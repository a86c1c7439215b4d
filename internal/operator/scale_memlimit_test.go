//go:build cluster

package operator

import (
	"os"
	"slices"
	"strings"
	"testing"

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
		limit = testutil.DeployedEnv(b, "deploy/operator/deployment.yaml", "operator", "GOMEMLIMIT")
	}
	if limit == "" || limit == "off" {
		return env, ""
	}
	return append(env, "GOMEMLIMIT="+limit), limit
}
