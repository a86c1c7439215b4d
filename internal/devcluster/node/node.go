package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// Name is the name of the real node.
const Name = "openfief-node"

// ErrNeedsRoot is wrapped by the error Prepare returns when the process is
// not root.
var ErrNeedsRoot = errors.New("a real node needs root")

// Options configures a node.
type Options struct {
	// BinDir holds the node's binaries (`make node`) and the control
	// plane's.
	BinDir string
	// ServiceCIDR is the cluster's Service range: the first address is the
	// kubernetes Service's, the tenth the cluster DNS's.
	ServiceCIDR string
	// ClusterDNS runs CoreDNS behind the kube-dns Service and the node's
	// resolver (devcluster's Options.ClusterDNS).
	ClusterDNS bool
	// Volumes is the number of pre-made PersistentVolumes.
	Volumes int
	// Output, if not nil, also receives the output of every process.
	Output io.Writer
	// StartTimeout bounds Start.
	StartTimeout time.Duration
	// LogDir is the cluster's folder of logs, where each process's goes.
	LogDir string
	// Watch hands the process group of each process the node starts to the
	// cluster's watchdog, which kills it if the starting process dies.
	Watch func(pgid int) error
}

// ControlPlane is what Start needs of the running control plane.
type ControlPlane struct {
	// Clientset is the cluster's admin client.
	Clientset kubernetes.Interface
	// KubeConfig returns a kubeconfig with a client certificate for user in
	// groups.
	KubeConfig func(user string, groups ...string) ([]byte, error)
	// Ready reports whether the named node is Ready and the controller
	// manager has done its first work.
	Ready func(ctx context.Context, node string) (bool, error)
	// Exited returns an error naming a control plane component that has
	// exited, nil while they all run.
	Exited func() error
}

// Node is a running real node.
type Node struct {
	opts       Options
	cp         ControlPlane // set by Start
	id         string
	layout     nodeLayout
	net        nodeNet
	certs      nodeCerts
	rec        nodeRecord
	lock       *os.File
	port       int    // the kubelet's
	proxyPorts [2]int // kube-proxy's healthz and metrics, on loopback
	procs      []*proc.Process
	regSrv     *http.Server
	regHost    string // 127.0.0.1:port of the node's registry
	sandbox    string // the pinned sandbox image
	// resolver is the node's resolver, with Options.ClusterDNS.
	resolver *nodeResolver
	// standIns counts the stand-in addresses on the bridge.
	standInMu sync.Mutex
	standIns  int
}

// Prepare does what must precede the control plane: it checks root and
// the binaries, takes the machine's node lock, cleans up after dead nodes,
// records what it will change, and makes the state folder, the bridge, the
// cgroup root, the registry with the sandbox image, the certificates and the
// configuration files. On error nothing is left.
func Prepare(opts Options) (n *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("devcluster: %w (containers, cgroups, a bridge and netfilter rules)", ErrNeedsRoot)
	}
	if err := requireBinaries(opts); err != nil {
		return nil, err
	}
	lock, err := lockNodes(LockWait())
	if err != nil {
		return nil, err
	}
	n = &Node{lock: lock, opts: opts}
	defer func() {
		if err != nil {
			// The start error is the one to report; a failed cleanup keeps
			// the state folder for the next start to retry.
			_ = n.Stop()
			n = nil
		}
	}()
	if err := cleanDeadNodes(); err != nil {
		return n, fmt.Errorf("devcluster: cleaning up after an earlier node: %w", err)
	}
	if err := n.makeStateFolder(); err != nil {
		return n, err
	}
	if n.net, err = addressing(n.id, opts.ServiceCIDR); err != nil {
		return n, err
	}
	// Record before changing anything: cleanup reads this.
	if err := n.record(); err != nil {
		return n, err
	}
	if err := n.makeBridge(); err != nil {
		return n, err
	}
	if opts.ClusterDNS {
		addr := net.JoinHostPort(n.net.gateway.String(), strconv.Itoa(resolverPort))
		if n.resolver, err = startResolver(addr, hostResolvConf); err != nil {
			return n, err
		}
	}
	if err := makeCgroupRoot(n.rec.CgroupRoot); err != nil {
		return n, err
	}
	if err := n.startRegistry(); err != nil {
		return n, err
	}
	if n.certs, err = writeNodeCerts(n.layout.dir); err != nil {
		return n, err
	}
	if err := n.pickPorts(); err != nil {
		return n, err
	}
	return n, n.writeConfig()
}

// Start runs containerd, the kubelet (until the node is Ready), kube-proxy
// and kube-router against the running control plane cp, then makes the
// pre-made volumes and starts the cluster DNS, as Options ask.
func (n *Node) Start(ctx context.Context, cp ControlPlane) error {
	n.cp = cp
	ctx, cancel := context.WithTimeout(ctx, n.opts.StartTimeout)
	defer cancel()
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.writeKubeconfigs(ctx); err != nil {
		return err
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	if err := n.startKubeProxy(); err != nil {
		return err
	}
	if err := n.startKubeRouter(); err != nil {
		return err
	}
	if err := n.waitForRules(ctx); err != nil {
		return err
	}
	if err := n.makeVolumes(ctx, n.opts.Volumes); err != nil {
		return err
	}
	if n.opts.ClusterDNS {
		return n.startDNS(ctx)
	}
	return nil
}

// Stop ends the node and cleans up everything it did to the machine, then
// releases the machine's node lock.
func (n *Node) Stop() error {
	var errs []error
	// kube-router, kube-proxy and the kubelet first, politely, so they leave
	// no half-written rule.
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].Name != containerdBin {
			n.procs[i].Stop(10 * time.Second)
		}
	}
	if n.layout.dir != "" {
		errs = append(errs, cleanNode(n.layout.dir))
	}
	for _, p := range n.procs {
		p.Stop(time.Second)
	}
	if n.regSrv != nil {
		errs = append(errs, n.regSrv.Close())
	}
	if n.resolver != nil {
		errs = append(errs, n.resolver.close())
	}
	unlockNodes(n.lock)
	return errors.Join(errs...)
}

// makeStateFolder picks the node's id and makes its state folder under
// StateRoot.
func (n *Node) makeStateFolder() error {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	n.id = hex.EncodeToString(b[:])
	if err := os.MkdirAll(StateRoot, 0o700); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	n.layout = newNodeLayout(filepath.Join(StateRoot, n.id))
	if err := os.Mkdir(n.layout.dir, 0o700); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	return nil
}

// startProcess starts the node's binary name with args, its output in the
// cluster's logs, and hands it to the watchdog: a kill of this process makes
// the watchdog end it too; the pods and the rest wait for CleanLeftovers.
func (n *Node) startProcess(name string, args ...string) (*proc.Process, error) {
	p, err := proc.Start(name, filepath.Join(n.opts.BinDir, name), args, n.processEnv(), n.opts.LogDir, n.opts.Output)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	if err := n.opts.Watch(p.Pid()); err != nil {
		return p, fmt.Errorf("devcluster: watchdog: %w", err)
	}
	return p, nil
}

// processEnv is the environment of the node's processes: this process's,
// with the binary directory first on PATH.
func (n *Node) processEnv() []string {
	return append(os.Environ(), "PATH="+n.opts.BinDir+":"+os.Getenv("PATH"))
}

// waitFor polls cond until it holds, failing early if a component of the
// control plane or of the node exits.
func (n *Node) waitFor(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if n.cp.Exited != nil {
			if err := n.cp.Exited(); err != nil {
				return false, err
			}
		}
		for _, p := range n.procs {
			if err := p.Exited(); err != nil {
				return false, err
			}
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("devcluster: waiting for %s (logs in %s): %w", what, n.opts.LogDir, err)
	}
	return nil
}

// StateDir returns the node's state folder.
func (n *Node) StateDir() string { return n.layout.dir }

// CgroupRoot returns the kubelet's cgroup root, /of-node-<id>, in every
// hierarchy.
func (n *Node) CgroupRoot() string { return n.rec.CgroupRoot }

// Registry returns the host:port of the node's own loopback registry, which
// serves the sandbox image and takes the tests' images.
func (n *Node) Registry() string { return n.regHost }

// ClusterDNS returns the address the kubelet gives pods as their cluster DNS
// server (CoreDNS answers there with Options.ClusterDNS, nothing otherwise).
func (n *Node) ClusterDNS() net.IP { return n.net.dns }

// Gateway returns the node's address on its bridge, which the pods can
// reach.
func (n *Node) Gateway() net.IP { return n.net.gateway }
