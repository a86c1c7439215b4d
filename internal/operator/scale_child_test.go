//go:build cluster

package operator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/memlimit"
	"github.com/arkadiuss/openfief/internal/operator/operatortest"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
)

// The scale benchmark runs the operator as a child process, the test binary
// started again with these variables set, so its RSS and heap are the
// operator's alone and not the test process's. TestMain hands
// such a process to runOperatorChild instead of running tests.
const (
	childKubeconfigEnv = "OPENFIEF_BENCH_CHILD_KUBECONFIG"
	childQPSEnv        = "OPENFIEF_BENCH_CHILD_QPS"
	childBurstEnv      = "OPENFIEF_BENCH_CHILD_BURST"
	childMetricsEnv    = "OPENFIEF_BENCH_CHILD_METRICS"
	childPprofEnv      = "OPENFIEF_BENCH_CHILD_PPROF"
	// benchWorkersEnv, when set, overrides MaxConcurrentReconciles.
	benchWorkersEnv = "OPENFIEF_BENCH_WORKERS"
	// benchMemoryLimitEnv, when set (a quantity such as 512Mi), runs the
	// child in a memory cgroup of that limit, as deploy/operator's
	// container; childCgroupEnv tells the child the cgroup to wait for.
	benchMemoryLimitEnv = "OPENFIEF_BENCH_MEMORY_LIMIT"
	childCgroupEnv      = "OPENFIEF_BENCH_CHILD_CGROUP"
)

// allSigned is the child's image checker: every image is signed by a trusted
// signer, so registry reads are not in the benchmark's figures.
type allSigned struct{}

func (allSigned) Check(context.Context, plugins.ImageRef, *plugins.Manifest) trust.Verification {
	return trust.Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Message: "signed by test", Signer: "test-owner"}
}

// runOperatorChild runs the operator as cmd/operator builds it (memlimit.Set,
// DefaultOptions, ManagerOptions, AddToManager) against the kubeconfig in childKubeconfigEnv,
// with metrics and pprof served where the parent says, until SIGTERM. It
// returns the process's exit code.
func runOperatorChild() int {
	if err := operatorChild(); err != nil {
		fmt.Fprintln(os.Stderr, "operator child:", err)
		return 1
	}
	return 0
}

func operatorChild() error {
	if path := os.Getenv(childCgroupEnv); path != "" {
		if err := testutil.WaitInMemoryCgroup(path, 10*time.Second); err != nil {
			return err
		}
	}
	if limit, err := memlimit.Set(slog.Default()); err != nil {
		return err
	} else if limit > 0 {
		fmt.Fprintln(os.Stderr, "operator child: Go memory limit", limit)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(childKubeconfigEnv))
	if err != nil {
		return err
	}
	qps, err := strconv.ParseFloat(os.Getenv(childQPSEnv), 32)
	if err != nil {
		return fmt.Errorf("%s: %w", childQPSEnv, err)
	}
	burst, err := strconv.Atoi(os.Getenv(childBurstEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", childBurstEnv, err)
	}
	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = allSigned{}
	o.LeaderElection = false
	o.HealthProbeBindAddress = ""
	o.MetricsBindAddress = os.Getenv(childMetricsEnv)
	if s := os.Getenv(benchWorkersEnv); s != "" {
		if o.MaxConcurrentReconciles, err = strconv.Atoi(s); err != nil {
			return fmt.Errorf("%s: %w", benchWorkersEnv, err)
		}
	}
	mgr, err := operatortest.New(cfg, operatortest.Options{
		Manager: func(s *runtime.Scheme) ctrl.Options {
			opts := o.ManagerOptions(s)
			opts.PprofBindAddress = os.Getenv(childPprofEnv)
			return opts
		},
		Setup: func(mgr ctrl.Manager) error { _, err := AddToManager(mgr, o); return err },
		QPS:   float32(qps), Burst: burst,
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
