//go:build cluster

// Package fault is the fault suite: the plugin platform on the
// local control plane (internal/devcluster in Full mode: etcd,
// kube-apiserver, controller-manager, scheduler, kwok) while its parts die.
//
//   - TestOperatorKilledUnderLoad: the operator binary is SIGKILLed at
//     random points (after its n-th write, before or after the API server
//     got it, or at a random time after start) while 50 plugins install,
//     upgrade and revoke, and restarted each time.
//   - TestAPIServerRestartedUnderLoad: the same load while kube-apiserver
//     restarts gracefully, then kube-apiserver and etcd are SIGKILLed and
//     restarted.
//   - TestLeaderFailover: two operator replicas with leader election; the
//     leader is SIGKILLed in the middle of a burst of changes, twice, and
//     the other takes over within the lease without repeating a write.
//   - TestProxyRestartedWithTunnelsOpen: the egress proxy restarts with
//     tunnels open; clients see a clean close, and a host revoked during the
//     shutdown or while the proxy is down is refused after it.
//
// After every fault the suite checks that each plugin converged to what its
// spec and grant say, that no object is duplicated or orphaned and that no
// revoked workload survives (converge_test.go).
//
// The operator runs as the real binary, built once per run, in a process
// group of its own; each replica talks to the API server through a counting
// reverse proxy in this process (tap_test.go), which is where write-triggered
// kills happen and which tells which replica wrote what.
//
// Random choices come from one seed, logged at the start: rerun with
// OPENFIEF_FAULT_SEED=<seed> to draw the same kill points and scenarios (the
// interleaving with the control plane still varies).
package fault

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/registry"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// SeedEnv names the environment variable that fixes the suite's seed.
const SeedEnv = "OPENFIEF_FAULT_SEED"

// Egress hosts the test images ask for: v1 the first, v2 both.
const (
	hostAPI    = "api.fault.example"
	hostStatic = "static.fault.example"
)

// suite holds what every test shares: the operator binary, the registry
// with the signed images and the signers file that trusts their key.
var suite struct {
	seed        uint64
	dir         string
	operatorBin string
	signersFile string
	registry    string
	v1, v2      image
}

// image is a signed plugin image in the suite's registry.
type image struct {
	ref      string
	manifest plugins.Manifest
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%q: %v\n", SeedEnv, s, err)
			return 2
		}
		seed = v
	}
	suite.seed = seed
	fmt.Fprintf(os.Stderr, "fault suite seed %d (rerun with %s=%d)\n", seed, SeedEnv, seed)

	go spawner()
	dir, err := os.MkdirTemp("", "openfief-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // nothing to report it to after the tests
	suite.dir = dir
	if err := setup(dir); err != nil {
		fmt.Fprintln(os.Stderr, "fault suite setup:", err)
		return 1
	}
	return m.Run()
}

// setup builds the operator and publishes the signed test images.
func setup(dir string) error {
	began := time.Now()
	suite.operatorBin = filepath.Join(dir, "operator")
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the operator: %w", err)
	}
	build := exec.Command(gobin, "build", "-o", suite.operatorBin, "github.com/arkadiuss/openfief/cmd/operator")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/operator: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "built the operator in %s\n", time.Since(began).Round(100*time.Millisecond))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithReferrersSupport(true), registry.Logger(discardLog())),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }() // the process ends with the suite
	suite.registry = ln.Addr().String()

	signer, err := ocisign.NewKeySigner()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publish := func(version string, hosts ...string) (image, error) {
		m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: hosts}
		img, err := ocisign.PluginImage(m, map[string][]byte{"VERSION": []byte(version)})
		if err != nil {
			return image{}, err
		}
		ref, err := ocisign.Push(ctx, suite.registry, "plugins/fault", img)
		if err != nil {
			return image{}, err
		}
		return image{ref: ref.String(), manifest: m}, signer.Sign(ctx, ref)
	}
	if suite.v1, err = publish("v1", hostAPI); err != nil {
		return err
	}
	if suite.v2, err = publish("v2", hostAPI, hostStatic); err != nil {
		return err
	}
	signers, err := signer.SignersJSON("fault-suite")
	if err != nil {
		return err
	}
	suite.signersFile = filepath.Join(dir, "signers.json")
	return os.WriteFile(suite.signersFile, signers, 0o600)
}

// rngFor returns the random source of one test, derived from the suite's
// seed and the test's name, so tests draw independently of their order.
func rngFor(t *testing.T) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(t.Name()))
	return rand.New(rand.NewPCG(suite.seed, h.Sum64()))
}

// spawnc carries process starts to spawner's thread.
var spawnc = make(chan spawnRequest)

type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

// spawner starts every child process from one OS thread that lives as long
// as the test binary, so that Pdeathsig (set by startProcess) kills the
// children if the test binary dies without cleaning up (a timeout, a kill),
// and never because some other thread of the Go runtime exited.
func spawner() {
	runtime.LockOSThread() // never unlocked: the thread must outlive every child
	for req := range spawnc {
		req.err <- req.cmd.Start()
	}
}

// startProcess starts cmd in a process group of its own that dies with the
// test binary.
func startProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = newSysProcAttr()
	}
	req := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	spawnc <- req
	return <-req.err
}

var errKilled = errors.New("killed by the suite")
