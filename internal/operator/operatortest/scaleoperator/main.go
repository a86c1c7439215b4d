// Command scaleoperator is the operator BenchmarkOperatorScale
// (internal/operator/scale_bench_test.go) measures. The benchmark builds it
// as a release builds cmd/operator (the same flags, no cgo) and starts it as
// a child process, so the memory it reads from /proc is this binary's alone:
// neither the benchmark's test binary nor its pages are in it.
//
// It runs what cmd/operator runs (memlimit.Set, DefaultOptions,
// ManagerOptions, AddToManager) with an image checker that passes every
// image, leader election off and no health probes, its metrics and pprof
// where the benchmark says, until SIGTERM. The benchmark configures it
// through the environment (childenv.go); it has no flags.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/memlimit"
	"github.com/arkadiuss/openfief/internal/operator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scaleoperator:", err)
		os.Exit(1)
	}
}

// run builds the operator the environment describes and runs it until
// SIGTERM or SIGINT.
func run() error {
	env, err := readChildEnv(os.Getenv)
	if err != nil {
		return err
	}
	if env.cgroup != "" {
		// The limit memlimit.Set reads is the cgroup's only once the
		// benchmark has moved this process into it.
		if err := waitUntilMoved(os.Stdin); err != nil {
			return fmt.Errorf("wait to be moved into memory cgroup %s: %w", env.cgroup, err)
		}
	}
	if limit, err := memlimit.Set(slog.Default()); err != nil {
		return err
	} else if limit > 0 {
		fmt.Fprintln(os.Stderr, "scaleoperator: Go memory limit", limit)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = env.qps, env.burst
	o := operator.DefaultOptions()
	o.Cluster.Gate.Image = env.gateImage
	o.Images = allSigned{}
	o.LeaderElection = false
	o.HealthProbeBindAddress = ""
	o.MetricsBindAddress = env.metrics
	if env.workers > 0 {
		o.MaxConcurrentReconciles = env.workers
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		return err
	}
	opts := o.ManagerOptions(scheme)
	opts.PprofBindAddress = env.pprof
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if _, err := operator.AddToManager(mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
