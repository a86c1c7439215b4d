//go:build cluster

package operator

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The scale benchmark runs the operator as a child process: the command in
// operatortest/scaleoperator, built as a release builds cmd/operator, so its
// RSS is that of the operator as shipped and not the test binary's. It tells
// the child what to do through these variables (scaleoperator's childenv.go
// reads the same).
const (
	childKubeconfigEnv = "OPENFIEF_BENCH_CHILD_KUBECONFIG"
	childQPSEnv        = "OPENFIEF_BENCH_CHILD_QPS"
	childBurstEnv      = "OPENFIEF_BENCH_CHILD_BURST"
	childMetricsEnv    = "OPENFIEF_BENCH_CHILD_METRICS"
	childPprofEnv      = "OPENFIEF_BENCH_CHILD_PPROF"
	childGateImageEnv  = "OPENFIEF_BENCH_CHILD_GATE_IMAGE"
	// benchWorkersEnv, when set, overrides MaxConcurrentReconciles; the
	// child reads it from the environment it inherits.
	benchWorkersEnv = "OPENFIEF_BENCH_WORKERS"
	// benchMemoryLimitEnv, when set (a quantity such as 512Mi), runs the
	// child in a memory cgroup of that limit, as deploy/operator's
	// container; childCgroupEnv tells the child the cgroup it is moved into,
	// and it waits until its stdin is closed, once it is there.
	benchMemoryLimitEnv = "OPENFIEF_BENCH_MEMORY_LIMIT"
	childCgroupEnv      = "OPENFIEF_BENCH_CHILD_CGROUP"
)

// childOperatorPackage is the operator the benchmark runs.
const childOperatorPackage = "./internal/operator/operatortest/scaleoperator"

// buildChildOperator builds childOperatorPackage for this machine as the
// release builds its binaries (images.BuildBinary: images.GoFlags, no cgo, a
// GOFLAGS from the environment ignored) into b's temporary directory and
// returns the binary's path.
func buildChildOperator(b *testing.B) string {
	b.Helper()
	bin, err := images.BuildBinary(context.Background(), "", testutil.MustRepoRoot(),
		v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}, childOperatorPackage, nil)
	if err != nil {
		b.Fatal(err)
	}
	exe := filepath.Join(b.TempDir(), filepath.Base(childOperatorPackage))
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := dropFromPageCache(exe); err != nil {
		b.Logf("operator child's pages stay cached, charged to this process's cgroup: %v", err)
	}
	b.Logf("operator child %s: %.1f MiB, built with %v", childOperatorPackage, float64(len(bin))/(1<<20), images.GoFlags)
	return exe
}

// dropFromPageCache writes the file at path to disk and asks the kernel to
// drop its cached pages, so the child reads its binary from disk and a memory
// cgroup it runs in is charged for those pages, as a container is for its
// image's binary, rather than the benchmark that wrote them.
func dropFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // opened read-only
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
