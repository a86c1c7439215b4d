package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/arkadiuss/openfief/internal/devcluster/node"
)

// NodeKind selects what plays the node of a Full cluster.
type NodeKind int

const (
	// NodeKwok registers fake nodes that kwok manages: no container runs.
	NodeKwok NodeKind = iota
	// NodeReal runs one real node beside the control plane: containerd,
	// the kubelet, kube-proxy (nftables mode) and kube-router's firewall, so
	// pods run as containers on a bridge of our own and NetworkPolicies are
	// enforced. It needs root and `make node` (docs/node.md). Package node
	// runs it.
	NodeReal
)

// String returns "kwok" or "real".
func (k NodeKind) String() string {
	switch k {
	case NodeKwok:
		return "kwok"
	case NodeReal:
		return "real"
	default:
		return fmt.Sprintf("NodeKind(%d)", int(k))
	}
}

// The real node's names and limits, as package node defines them.
const (
	// RealNodeName is the name of the real node.
	RealNodeName = node.Name
	// NodeStateRoot is the folder under which every real node keeps its
	// state folder, <NodeStateRoot>/<id>; what is found there after a killed
	// run is cleaned up by the next start ([CleanNodeLeftovers]).
	NodeStateRoot = node.StateRoot
	// EnvNodeLockWait names the variable whose Go duration bounds the wait
	// for the machine's node lock ([NodeLockWait]).
	EnvNodeLockWait = node.EnvLockWait
	// APIServerNodePort is the API server's port on a real node's bridge
	// address.
	APIServerNodePort = node.APIServerPort
	// PodPidsLimit is how many processes and threads one pod on the real
	// node may hold (the kubelet's podPidsLimit).
	PodPidsLimit = node.PodPidsLimit
	// ClusterDNSService is the cluster DNS's Service in kube-system
	// (Options.ClusterDNS).
	ClusterDNSService = node.ClusterDNSService
	// VolumeCapacity is the capacity of each pre-made PersistentVolume
	// (Options.Volumes).
	VolumeCapacity = node.VolumeCapacity
)

// ErrNodeNeedsRoot is wrapped by the error Start returns for a real node
// when the process is not root.
var ErrNodeNeedsRoot = node.ErrNeedsRoot

// StandInPrefix is the range stand-in addresses come from ([Cluster.StandIn]):
// the AS112 direct delegation prefix (RFC 7534); see node.StandInPrefix.
var StandInPrefix = node.StandInPrefix

// NodeLockWait is how long a real node waits for the machine's node lock:
// $OPENFIEF_NODE_LOCK_WAIT when it holds a positive duration, else five
// minutes. The tests' leftover checks wait as long.
func NodeLockWait() time.Duration { return node.LockWait() }

// CleanNodeLeftovers cleans up after every real node whose starting process
// is gone (a killed test, a crashed `openfief dev`), waiting at most timeout
// for the machine's node lock; see node.CleanLeftovers.
func CleanNodeLeftovers(timeout time.Duration) error { return node.CleanLeftovers(timeout) }

// NodeLeftovers lists every trace of a real node on this machine, one line
// each; after Stop or CleanNodeLeftovers it should be empty. See
// node.Leftovers.
func NodeLeftovers() ([]string, error) { return node.Leftovers() }

// NodeLeftoversWhenIdle is NodeLeftovers taken while no real node runs on
// the machine (it waits at most timeout for the node lock); see
// node.LeftoversWhenIdle. Tests check their cleanup with it.
func NodeLeftoversWhenIdle(timeout time.Duration) ([]string, error) {
	return node.LeftoversWhenIdle(timeout)
}

// NodeComponent names a process of the real node that KillNodeComponent
// can kill and start again.
type NodeComponent = node.Component

// The node's components a fault test may kill.
const (
	NodeContainerd = node.Containerd
	NodeKubelet    = node.Kubelet
)

// prepareNode does what must precede the control plane for a real node
// (node.Prepare: the lock, the state folder, the bridge, the registry, the
// certificates and the configuration), and hands the node's state folder
// and cgroups to the watchdog, so a kill of this process also ends the pods
// and the shims.
func (c *Cluster) prepareNode(opts Options) error {
	n, err := node.Prepare(node.Options{
		BinDir:       c.binDir,
		ServiceCIDR:  ServiceCIDR,
		ClusterDNS:   opts.ClusterDNS,
		Volumes:      opts.Volumes,
		Output:       opts.Output,
		StartTimeout: opts.StartTimeout,
		LogDir:       c.logDir(),
		Watch:        c.reaper.watch,
	})
	if err != nil {
		return err
	}
	c.node = n
	if err := c.reaper.watchNode(n.StateDir(), n.CgroupRoot()); err != nil {
		return fmt.Errorf("devcluster: watchdog: %w", err)
	}
	return nil
}

// startNode starts the real node against the running control plane: the
// node's identities are users of envtest's API server, and it waits for
// the node as for the fake ones (fullReady).
func (c *Cluster) startNode(ctx context.Context, cs kubernetes.Interface) error {
	return c.node.Start(ctx, node.ControlPlane{
		Clientset: cs,
		KubeConfig: func(user string, groups ...string) ([]byte, error) {
			u, err := c.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
			if err != nil {
				return nil, err
			}
			return u.KubeConfig()
		},
		Ready: func(ctx context.Context, name string) (bool, error) {
			return fullReady(ctx, cs, []string{name})
		},
		Exited: c.exited,
	})
}

// errNoNode is the error of a real-node method on a cluster without one.
func errNoNode(method string) error {
	return errors.New("devcluster: " + method + " needs a real node")
}

// TrustRegistry lets the real node pull from the registry host (host:port)
// over plain HTTP. It is an error on a cluster without a real node, or for
// a host that is neither on loopback nor the node's bridge address
// (NodeGateway), where a registry the pods also reach can listen.
func (c *Cluster) TrustRegistry(host string) error {
	if c.node == nil {
		return errNoNode("TrustRegistry")
	}
	return c.node.TrustRegistry(host)
}

// NodeRegistry returns the host:port of the real node's own loopback
// registry, which serves the sandbox image and takes the tests' images, or
// "" without a real node.
func (c *Cluster) NodeRegistry() string {
	if c.node == nil {
		return ""
	}
	return c.node.Registry()
}

// NodeStateDir returns the real node's state folder, or "" without one.
func (c *Cluster) NodeStateDir() string {
	if c.node == nil {
		return ""
	}
	return c.node.StateDir()
}

// ClusterDNS returns the address the real node's kubelet gives pods as
// their cluster DNS server (CoreDNS answers there with Options.ClusterDNS,
// nothing otherwise), or nil without a real node.
func (c *Cluster) ClusterDNS() net.IP {
	if c.node == nil {
		return nil
	}
	return c.node.ClusterDNS()
}

// NodeGateway returns the real node's address on its bridge, which the pods
// can reach, or nil without a real node.
func (c *Cluster) NodeGateway() net.IP {
	if c.node == nil {
		return nil
	}
	return c.node.Gateway()
}

// VolumeDir returns the folder on the machine behind the pre-made
// PersistentVolume name, or "" without a real node.
func (c *Cluster) VolumeDir(name string) string {
	if c.node == nil {
		return ""
	}
	return c.node.VolumeDir(name)
}

// StandIn makes host name the real node's stand-in for an outside server:
// an address of StandInPrefix on the node's bridge that the node's
// resolver, and so the cluster DNS, answers name with (node.Node.StandIn).
// It needs Options.ClusterDNS. Asking again for the same name returns the
// same address.
func (c *Cluster) StandIn(name string) (netip.Addr, error) {
	if c.node == nil {
		return netip.Addr{}, errors.New("devcluster: StandIn needs a real node with ClusterDNS")
	}
	return c.node.StandIn(name)
}

// StandInAddress adds an address of StandInPrefix to the real node's
// bridge, where a server of the caller's can listen and every pod can
// connect, without a name (node.Node.StandInAddress).
func (c *Cluster) StandInAddress() (netip.Addr, error) {
	if c.node == nil {
		return netip.Addr{}, errNoNode("StandInAddress")
	}
	return c.node.StandInAddress()
}

// PodNetNS returns the network namespace of the real node's pod with the
// given UID, as a path that `nsenter --net=PATH` or setns takes
// (node.Node.PodNetNS).
func (c *Cluster) PodNetNS(uid string) (string, error) {
	if c.node == nil {
		return "", errNoNode("PodNetNS")
	}
	return c.node.PodNetNS(uid)
}

// PodPIDs returns the processes of the real node's pod with the given UID
// (node.Node.PodPIDs).
func (c *Cluster) PodPIDs(uid string) ([]int, error) {
	if c.node == nil {
		return nil, errNoNode("PodPIDs")
	}
	return c.node.PodPIDs(uid)
}

// PodTraces lists what of one pod is still on the real node, one line each
// (node.Node.PodTraces): empty once the kubelet and containerd have removed
// the pod, and nil without a real node.
func (c *Cluster) PodTraces(podUID string, containerIDs []string) []string {
	if c.node == nil {
		return nil
	}
	return c.node.PodTraces(podUID, containerIDs)
}

// StopNetworkPolicy takes the real node's NetworkPolicy controller away, so
// nothing polices the pods any more, as on a cluster whose network plugin
// does not enforce NetworkPolicy (node.Node.StopNetworkPolicy);
// StartNetworkPolicy brings it back. It must not run concurrently with Stop.
func (c *Cluster) StopNetworkPolicy(ctx context.Context) error {
	restartMu.Lock()
	defer restartMu.Unlock()
	if c.node == nil {
		return errNoNode("StopNetworkPolicy")
	}
	return c.node.StopNetworkPolicy(ctx)
}

// StartNetworkPolicy starts the real node's NetworkPolicy controller again
// after StopNetworkPolicy and returns once it enforces the cluster's
// NetworkPolicies again (node.Node.StartNetworkPolicy). It must not run
// concurrently with Stop.
func (c *Cluster) StartNetworkPolicy(ctx context.Context) error {
	restartMu.Lock()
	defer restartMu.Unlock()
	if c.node == nil {
		return errNoNode("StartNetworkPolicy")
	}
	return c.node.StartNetworkPolicy(ctx)
}

// KillNodeComponent ends the real node's process comp with SIGKILL, as a
// crash would, keeps it down for down, and starts it again, returning once
// it serves again (node.Node.KillComponent). It is meant for fault tests
// and must not run concurrently with Stop.
func (c *Cluster) KillNodeComponent(ctx context.Context, comp NodeComponent, down time.Duration) error {
	restartMu.Lock()
	defer restartMu.Unlock()
	if c.node == nil {
		return errNoNode("KillNodeComponent")
	}
	return c.node.KillComponent(ctx, comp, down)
}
