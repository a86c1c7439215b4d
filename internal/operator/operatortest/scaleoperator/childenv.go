package main

import (
	"fmt"
	"io"
	"strconv"
)

// The variables the benchmark sets for its operator; scale_child_test.go in
// internal/operator names the same ones.
const (
	kubeconfigEnv = "OPENFIEF_BENCH_CHILD_KUBECONFIG"
	qpsEnv        = "OPENFIEF_BENCH_CHILD_QPS"
	burstEnv      = "OPENFIEF_BENCH_CHILD_BURST"
	metricsEnv    = "OPENFIEF_BENCH_CHILD_METRICS"
	pprofEnv      = "OPENFIEF_BENCH_CHILD_PPROF"
	gateImageEnv  = "OPENFIEF_BENCH_CHILD_GATE_IMAGE"
	cgroupEnv     = "OPENFIEF_BENCH_CHILD_CGROUP"
	workersEnv    = "OPENFIEF_BENCH_WORKERS"
)

// childEnv is what the benchmark tells its operator.
type childEnv struct {
	kubeconfig string  // the API server's kubeconfig file
	qps        float32 // the client's rate limit
	burst      int
	metrics    string // address of the metrics endpoint
	pprof      string // address of pprof, "" for none
	gateImage  string // the isolation gate image by digest, never pulled
	// cgroup, when set, is the memory cgroup the benchmark moves this
	// process into once started; it closes stdin when it has.
	cgroup string
	// workers, when positive, replaces MaxConcurrentReconciles.
	workers int
}

// readChildEnv reads the benchmark's variables through getenv; a missing or
// malformed one is an error naming it.
func readChildEnv(getenv func(string) string) (childEnv, error) {
	e := childEnv{
		kubeconfig: getenv(kubeconfigEnv),
		metrics:    getenv(metricsEnv),
		pprof:      getenv(pprofEnv),
		gateImage:  getenv(gateImageEnv),
		cgroup:     getenv(cgroupEnv),
	}
	for _, name := range []string{kubeconfigEnv, metricsEnv, gateImageEnv} {
		if getenv(name) == "" {
			return childEnv{}, fmt.Errorf("%s: must be set", name)
		}
	}
	qps, err := strconv.ParseFloat(getenv(qpsEnv), 32)
	if err != nil || qps <= 0 {
		return childEnv{}, fmt.Errorf("%s=%q: must be a positive number", qpsEnv, getenv(qpsEnv))
	}
	e.qps = float32(qps)
	if e.burst, err = strconv.Atoi(getenv(burstEnv)); err != nil || e.burst <= 0 {
		return childEnv{}, fmt.Errorf("%s=%q: must be a positive integer", burstEnv, getenv(burstEnv))
	}
	if s := getenv(workersEnv); s != "" {
		if e.workers, err = strconv.Atoi(s); err != nil || e.workers <= 0 {
			return childEnv{}, fmt.Errorf("%s=%q: must be a positive integer", workersEnv, s)
		}
	}
	return e, nil
}

// waitUntilMoved returns once r, the benchmark's end of a pipe, is closed:
// the benchmark closes it after moving this process into its cgroup.
func waitUntilMoved(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
