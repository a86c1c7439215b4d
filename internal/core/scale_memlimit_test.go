package core

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// scaleGoMemLimitEnv sets the soft memory limit the scale benchmarks run
// the core under (such as 192MiB, or off for none). Unset, they take the
// GOMEMLIMIT deploy/core gives the core's container, so they measure the
// core as it is deployed.
const scaleGoMemLimitEnv = "OPENFIEF_BENCH_GOMEMLIMIT"

// withDeployedMemoryLimit gives this process, which runs the core in the
// scale benchmarks, the core's soft memory limit until b ends, and returns
// it as written ("" for none).
func withDeployedMemoryLimit(b *testing.B) string {
	b.Helper()
	limit, set := os.LookupEnv(scaleGoMemLimitEnv)
	if !set {
		limit = testutil.DeployedEnv(b, "deploy/core/deployment.yaml", "core", "GOMEMLIMIT")
	}
	if limit == "" || limit == "off" {
		return ""
	}
	bytes, err := parseGoMemLimit(limit)
	if err != nil {
		b.Fatalf("GOMEMLIMIT %q: %v", limit, err)
	}
	prev := debug.SetMemoryLimit(bytes)
	b.Cleanup(func() { debug.SetMemoryLimit(prev) })
	return limit
}

// parseGoMemLimit reads a GOMEMLIMIT as the Go runtime does: a whole number
// of bytes with an optional unit B, KiB, MiB, GiB or TiB.
func parseGoMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("not a number of bytes with a unit B, KiB, MiB, GiB or TiB")
	}
	return n << shift, nil
}

// TestParseGoMemLimit reads the forms GOMEMLIMIT takes and refuses others,
// and reads deploy/core's own.
func TestParseGoMemLimit(t *testing.T) {
	for in, want := range map[string]int64{"192MiB": 192 << 20, "1GiB": 1 << 30, "4096": 4096, "10B": 10, "3KiB": 3 << 10, "2TiB": 2 << 40} {
		if got, err := parseGoMemLimit(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "192Mi", "MiB", "-1MiB", "1.5GiB", "99999999999TiB", "192 MiB"} {
		if got, err := parseGoMemLimit(in); err == nil {
			t.Errorf("%q: %d, want an error", in, got)
		}
	}
	deployed := testutil.DeployedEnv(t, "deploy/core/deployment.yaml", "core", "GOMEMLIMIT")
	if _, err := parseGoMemLimit(deployed); err != nil {
		t.Errorf("deploy/core's GOMEMLIMIT %q: %v", deployed, err)
	}
	if deployed == "" {
		t.Error("deploy/core gives the core no GOMEMLIMIT")
	}
}
