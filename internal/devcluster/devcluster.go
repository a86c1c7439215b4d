package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/arkadiuss/openfief/internal/devcluster/node"
	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// Mode selects which components a cluster runs.
type Mode int

const (
	// Minimal runs etcd and kube-apiserver only.
	Minimal Mode = iota
	// Full also runs kube-controller-manager, kube-scheduler and kwok with
	// fake nodes.
	Full
)

// String returns "minimal" or "full".
func (m Mode) String() string {
	switch m {
	case Minimal:
		return "minimal"
	case Full:
		return "full"
	default:
		return fmt.Sprintf("Mode(%d)", int(m))
	}
}

// ServiceCIDR is the range Services get ClusterIPs from: 65,534 addresses.
const ServiceCIDR = "10.0.0.0/16"

// Options configures a cluster.
type Options struct {
	// Mode selects the components; the zero value is Minimal.
	Mode Mode
	// CRDDirectoryPaths are directories (or files) of CustomResourceDefinitions
	// to install; Start returns once they are all Established. A missing path
	// is an error.
	CRDDirectoryPaths []string
	// Nodes is the number of fake nodes in Full mode; zero means one.
	Nodes int
	// BinDir holds the binaries; empty means BinDir().
	BinDir string
	// Output, if not nil, also receives the output of every process. It is
	// always written to log files in the cluster directory too.
	Output io.Writer
	// StartTimeout bounds the start of each component; zero means 60 s.
	StartTimeout time.Duration
	// Node selects what plays the node in Full mode: kwok's fake nodes (the
	// zero value) or one real node (NodeReal: root, `make node`,
	// docs/node.md), which needs Nodes to be 0 or 1.
	Node NodeKind
	// ClusterDNS, with a real node, runs the cluster DNS: CoreDNS (`make
	// node` builds it) as a kube-system Deployment behind the kube-dns
	// Service at the kubelet's clusterDNS address; Start returns once it
	// answers. It serves the cluster's names only (docs/node.md).
	ClusterDNS bool
	// Volumes, with a real node, is the number of PersistentVolumes of no
	// class (VolumeCapacity each, ReadWriteOnce, hostPath folders in the
	// node's state folder) Start makes, so claims of no class bind; there
	// is no provisioner. What they hold goes when the cluster stops.
	Volumes int
	// ControllerIdentities, in Full mode with fake nodes, has the
	// controller manager's controllers act under their own ServiceAccounts
	// in kube-system (--use-service-account-credentials), as real clusters
	// and the real node's do, so deploy/admission's policy sees the
	// identities it expects. Without it they act as the cluster admin.
	ControllerIdentities bool
}

// Cluster is a running control plane. Its methods are safe to call from
// several goroutines.
type Cluster struct {
	// Config connects to the API server as a member of system:masters.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for the same identity, for
	// external tools.
	KubeconfigPath string
	// Dir is the temporary directory holding all of the cluster's state,
	// logs included; Stop removes it.
	Dir string
	// Mode is the mode the cluster runs in.
	Mode Mode

	binDir string // where the binaries are
	env    *envtest.Environment
	procs  []*proc.Process  // the controller manager and the scheduler
	kwok   *proc.Supervised // kwok, started again if it crashes (Full mode without a real node)
	reaper *reaper
	node   *node.Node // the real node, if Options.Node is NodeReal
	// logFiles hold etcd's and kube-apiserver's output. They stay open until
	// Stop: with Options.Output set, envtest copies the output into them
	// through a pipe for as long as the processes run, and closing them
	// earlier broke that pipe and killed both processes with SIGPIPE.
	logFiles []*os.File

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane as opts describe and waits until it serves:
// the API server answers, the CRDs are established and, in Full mode, every
// fake node is Ready and the controllers run. On error nothing is left
// running. Cancelling ctx aborts the start.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Mode != Minimal && opts.Mode != Full {
		return nil, fmt.Errorf("devcluster: unknown mode %v", opts.Mode)
	}
	if opts.Nodes < 0 {
		return nil, fmt.Errorf("devcluster: Nodes must not be negative, got %d", opts.Nodes)
	}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	switch {
	case opts.Node != NodeKwok && opts.Node != NodeReal:
		return nil, fmt.Errorf("devcluster: unknown node kind %v", opts.Node)
	case opts.Node == NodeReal && (opts.Mode != Full || opts.Nodes != 1):
		return nil, fmt.Errorf("devcluster: a real node needs Mode Full and one node, got %v and %d", opts.Mode, opts.Nodes)
	case opts.ClusterDNS && opts.Node != NodeReal:
		return nil, errors.New("devcluster: ClusterDNS needs a real node")
	case opts.Volumes < 0 || opts.Volumes > 0 && opts.Node != NodeReal:
		return nil, fmt.Errorf("devcluster: Volumes needs a real node and must not be negative, got %d", opts.Volumes)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	required := []string{etcdBin, apiServerBin}
	if opts.Mode == Full {
		required = append(required, controllerManagerBin, schedulerBin)
		if opts.Node == NodeKwok {
			required = append(required, kwokBin, kwokStagesFile)
		}
	}
	if err := requireFiles(binDir, required...); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "openfief-devcluster-")
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	c = &Cluster{Dir: dir, Mode: opts.Mode, binDir: binDir}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	if c.reaper, err = startReaper(dir); err != nil {
		_ = os.RemoveAll(dir)
		return c, err
	}
	for _, sub := range []string{"logs", "etcd", "apiserver"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return c, fmt.Errorf("devcluster: %w", err)
		}
	}

	if opts.Node == NodeReal {
		// Before the API server: its flags name the node's certificates.
		if err := c.prepareNode(opts); err != nil {
			return c, err
		}
	}
	if err := c.startAPIServer(ctx, binDir, opts); err != nil {
		return c, err
	}
	if opts.Mode == Full {
		if err := c.startFull(ctx, binDir, opts); err != nil {
			return c, err
		}
	}
	return c, nil
}

// startAPIServer starts etcd and kube-apiserver through envtest, installs the
// CRDs and writes the kubeconfig.
func (c *Cluster) startAPIServer(ctx context.Context, binDir string, opts Options) error {
	logs := c.logDir()
	etcdLog, err := os.Create(filepath.Join(logs, "etcd.log"))
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	c.logFiles = append(c.logFiles, etcdLog)
	apiLog, err := os.Create(filepath.Join(logs, "kube-apiserver.log"))
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	c.logFiles = append(c.logFiles, apiLog)
	var etcdOut, apiOut io.Writer = etcdLog, apiLog
	if opts.Output != nil {
		etcdOut = io.MultiWriter(etcdLog, opts.Output)
		apiOut = io.MultiWriter(apiLog, opts.Output)
	}

	c.env = &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    filepath.Join(binDir, etcdBin),
				DataDir: filepath.Join(c.Dir, "etcd"),
				Out:     etcdOut,
				Err:     etcdOut,
			},
			APIServer: &envtest.APIServer{
				Path:    filepath.Join(binDir, apiServerBin),
				CertDir: filepath.Join(c.Dir, "apiserver"),
				Out:     apiOut,
				Err:     apiOut,
			},
		},
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// envtest's default Service range, a /24, holds 254 ClusterIPs; every
	// plugin gets a Service, so the operator's scale benchmark (500
	// plugins) needs more.
	c.env.ControlPlane.APIServer.Configure().Set("service-cluster-ip-range", ServiceCIDR)
	if c.node != nil {
		if err := c.node.ConfigureAPIServer(c.env.ControlPlane.APIServer); err != nil {
			return err
		}
	}
	// envtest cannot be interrupted and gives no process ids: while it
	// starts, hand each process it starts to the watchdog as soon as it
	// appears, so that dying mid-start leaves nothing behind.
	startErr := make(chan error, 1)
	go func() {
		_, err := c.env.Start()
		startErr <- err
	}()
	watched := map[int]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var errStart error
	for done := false; !done; {
		select {
		case errStart = <-startErr:
			done = true
		case <-tick.C:
		}
		if err := c.watchChildren(watched); err != nil && errStart == nil {
			errStart = err
		}
	}
	if errStart == nil {
		errStart = ctx.Err()
	}
	if errStart != nil {
		return fmt.Errorf("devcluster: starting etcd and kube-apiserver (logs in %s): %w", logs, errStart)
	}

	c.Config = rest.CopyConfig(c.env.Config)
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, c.env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("devcluster: writing the kubeconfig: %w", err)
	}
	return nil
}

// watchChildren hands the process groups of the etcd and kube-apiserver of
// this cluster not yet in watched to the watchdog, and adds them to watched.
func (c *Cluster) watchChildren(watched map[int]bool) error {
	pids, err := childrenIn(c.Dir)
	if err != nil {
		return fmt.Errorf("devcluster: listing etcd and kube-apiserver: %w", err)
	}
	for _, pid := range pids {
		// The watchdog's own command line names the directory too.
		if watched[pid] || pid == c.reaper.cmd.Process.Pid {
			continue
		}
		if err := c.reaper.watch(pid); err != nil {
			return fmt.Errorf("devcluster: watchdog: %w", err)
		}
		watched[pid] = true
	}
	return nil
}

// Clientset returns a typed client for the cluster's admin identity.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.Config)
}

// Stop ends every process of the cluster and removes its directory. It is
// safe to call more than once; later calls return the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		// The real node first: it cleans up what it did to the machine.
		if c.node != nil {
			if err := c.node.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("devcluster: stopping the real node: %w", err))
			}
		}
		// Stop in the reverse order of start: kwok, scheduler, controller
		// manager, then the API server and etcd.
		if c.kwok != nil {
			c.kwok.Stop(10 * time.Second)
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].Stop(10 * time.Second)
		}
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("devcluster: stopping etcd and kube-apiserver: %w", err))
			}
		}
		if c.reaper != nil {
			if len(errs) == 0 {
				c.reaper.disarm()
			} else {
				// Closing without disarming makes the watchdog kill what
				// envtest could not stop.
				_ = c.reaper.w.Close()
			}
		}
		// Last: with Output set, envtest copies into these logs for as long as
		// etcd and kube-apiserver run.
		for _, f := range c.logFiles {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("devcluster: %w", err))
			}
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("devcluster: %w", err))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// logDir is the folder of the cluster's logs, one file per process.
func (c *Cluster) logDir() string { return filepath.Join(c.Dir, "logs") }
