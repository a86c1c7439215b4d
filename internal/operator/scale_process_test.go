//go:build cluster

package operator

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// childOperator is the operator run as a child process by the scale
// benchmark (the binary buildChildOperator makes): its memory is read from
// /proc/<pid> and its writes, reconciles and queue depth from its own
// Prometheus metrics.
type childOperator struct {
	cmd     *exec.Cmd
	metrics string // http://127.0.0.1:port/metrics
	pprof   string // http://127.0.0.1:port/debug/pprof
	log     string
	done    chan struct{} // closed once the process has exited
	exitErr error         // Wait's error, set before done closes
}

// startChildOperator starts exe (buildChildOperator's) as the operator
// against c, its client limited to qps and burst; it is stopped when the
// benchmark ends.
func startChildOperator(b *testing.B, exe string, c *devcluster.Cluster, qps float64, burst int) *childOperator {
	b.Helper()
	metricsAddr, pprofAddr := freeAddr(b), freeAddr(b)
	op := &childOperator{
		metrics: "http://" + metricsAddr + "/metrics",
		pprof:   "http://" + pprofAddr + "/debug/pprof",
		log:     filepath.Join(b.TempDir(), "operator.log"),
		done:    make(chan struct{}),
	}
	logf, err := os.Create(op.log)
	if err != nil {
		b.Fatal(err)
	}
	op.cmd = exec.Command(exe)
	env, goMemLimit := childEnv(b, os.Environ())
	if goMemLimit != "" {
		b.Logf("operator child with GOMEMLIMIT=%s", goMemLimit)
	}
	op.cmd.Env = append(env,
		childKubeconfigEnv+"="+c.KubeconfigPath,
		childQPSEnv+"="+strconv.FormatFloat(qps, 'f', -1, 64),
		childBurstEnv+"="+strconv.Itoa(burst),
		childMetricsEnv+"="+metricsAddr,
		childPprofEnv+"="+pprofAddr,
		childGateImageEnv+"="+testutil.GateImage)
	var (
		cg    *testutil.MemoryCgroup
		moved io.WriteCloser // closed once the child is in cg
	)
	if s := os.Getenv(benchMemoryLimitEnv); s != "" {
		limit, err := resource.ParseQuantity(s)
		if err != nil {
			b.Fatalf("%s=%q: %v", benchMemoryLimitEnv, s, err)
		}
		cg = testutil.NewMemoryCgroup(b, limit.Value())
		op.cmd.Env = append(op.cmd.Env, childCgroupEnv+"="+cg.Path)
		if moved, err = op.cmd.StdinPipe(); err != nil {
			b.Fatal(err)
		}
	}
	op.cmd.Stdout, op.cmd.Stderr = logf, logf
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := op.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { op.exitErr = op.cmd.Wait(); _ = logf.Close(); close(op.done) }()
	b.Cleanup(op.stop)
	if cg != nil {
		if err := cg.Add(op.cmd.Process.Pid); err != nil {
			b.Fatalf("move the operator child into %s: %v", cg.Dir, err)
		}
		if err := moved.Close(); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := op.scrape(); err == nil {
			return op
		}
		select {
		case <-op.done:
			b.Fatalf("operator child exited: %v; log %s", op.exitErr, op.log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("operator child serves no metrics after a minute; log %s", op.log)
		}
	}
}

// stop sends SIGTERM and waits for the child to exit.
func (op *childOperator) stop() {
	select {
	case <-op.done:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM) // already gone is fine
	select {
	case <-op.done:
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.done
	}
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// childFigures is what the child's metrics say at one moment.
type childFigures struct {
	writes     float64 // POST, PUT, PATCH and DELETE requests its clients sent
	reconciles float64 // Plugin reconciles finished
	depth      float64 // Plugin requests queued
	heap       float64 // bytes in the Go heap's spans in use (live objects and garbage not yet swept)
}

// scrape reads the child's metrics.
func (op *childOperator) scrape() (childFigures, error) {
	resp, err := http.Get(op.metrics) //nolint:noctx // loopback, the benchmark's own child
	if err != nil {
		return childFigures{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var f childFigures
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		switch {
		case strings.HasPrefix(name, "rest_client_requests_total{"):
			for _, m := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
				if strings.Contains(name, m) {
					f.writes += v
				}
			}
		case strings.HasPrefix(name, "controller_runtime_reconcile_total{") && strings.Contains(name, `controller="plugin"`):
			f.reconciles += v
		case strings.HasPrefix(name, "workqueue_depth{") && strings.Contains(name, `name="plugin"`):
			f.depth += v
		case name == "go_memstats_heap_inuse_bytes":
			f.heap = v
		}
	}
	return f, s.Err()
}

// memory returns the child's resident memory now and at its peak (VmRSS,
// VmHWM), and the part of it now that is file pages (RssFile: mostly its
// binary's, built as cmd/operator is), in MiB.
func (op *childOperator) memory() (rss, peak, file float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", op.cmd.Process.Pid))
	if err != nil {
		return 0, 0, 0
	}
	defer func() { _ = f.Close() }() // opened read-only: a failed Close loses nothing
	s := bufio.NewScanner(f)
	for s.Scan() {
		for key, dst := range map[string]*float64{"VmRSS:": &rss, "VmHWM:": &peak, "RssFile:": &file} {
			if rest, ok := strings.CutPrefix(s.Text(), key); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				*dst = kb / 1024
			}
		}
	}
	return rss, peak, file
}

// saveProfile writes the child's pprof profile kind (with query, such as
// seconds=30) to dir/name; errors are reported, not fatal.
func (op *childOperator) saveProfile(b *testing.B, kind, query, dir, name string) {
	resp, err := http.Get(op.pprof + "/" + kind + "?" + query) //nolint:noctx // loopback, the benchmark's own child
	if err != nil {
		b.Logf("profile %s: %v", kind, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Logf("profile %s: %v", kind, err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Logf("profile %s: %v", kind, err)
	}
}
