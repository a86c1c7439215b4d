package devcluster

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
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// NodeKind selects what plays the node of a Full cluster.
type NodeKind int

const (
	// NodeKwok registers fake nodes that kwok manages: no container runs.
	NodeKwok NodeKind = iota
	// NodeReal runs one real node beside the control plane: containerd,
	// the kubelet, kube-proxy (nftables mode) and kube-router's firewall, so
	// pods run as containers on a bridge of our own and NetworkPolicies are
	// enforced. It needs root and `make node` (docs/node.md).
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

// Names of the files `make node` links into the binary directory.
const (
	containerdBin = "containerd"
	shimBin       = "containerd-shim-runc-v2"
	kubeletBin    = "kubelet"
	kubeProxyBin  = "kube-proxy"
	kubeRouterBin = "kube-router"
	pauseBin      = "pause"
)

// RealNodeName is the name of the real node.
const RealNodeName = "openfief-node"

// ErrNodeNeedsRoot is wrapped by the error Start returns for a real node
// when the process is not root.
var ErrNodeNeedsRoot = errors.New("a real node needs root")

// The CNI plugins the node's network uses, from Debian's
// containernetworking-plugins.
var cniPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// defaultNodeLockWait bounds the wait for the machine's node lock: another
// real node (a test package running in parallel, `openfief dev --node real`)
// may hold it.
const defaultNodeLockWait = 5 * time.Minute

// EnvNodeLockWait names the variable whose Go duration replaces
// defaultNodeLockWait: `make test` sets it, since its real-node packages run
// in parallel and each waits for the others' nodes (the in-cluster suite
// holds one for minutes).
const EnvNodeLockWait = "OPENFIEF_NODE_LOCK_WAIT"

// NodeLockWait is how long a real node waits for the machine's node lock:
// $OPENFIEF_NODE_LOCK_WAIT when it holds a positive duration, else five
// minutes. The tests' leftover checks wait as long.
func NodeLockWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EnvNodeLockWait)); err == nil && d > 0 {
		return d
	}
	return defaultNodeLockWait
}

// debianCNIDir is where Debian installs the CNI plugins.
const debianCNIDir = "/usr/lib/cni"

// realNode is the state of a running real node.
type realNode struct {
	id         string
	layout     nodeLayout
	net        nodeNet
	certs      nodeCerts
	rec        nodeRecord
	binDir     string
	lock       *os.File
	port       int    // the kubelet's
	proxyPorts [2]int // kube-proxy's healthz and metrics, on loopback
	procs      []*process
	regSrv     *http.Server
	regHost    string // 127.0.0.1:port of the node's registry
	sandbox    string // the pinned sandbox image
	// resolver is the node's resolver, with Options.ClusterDNS.
	resolver *nodeResolver
	// standIns counts the stand-in addresses on the bridge.
	standInMu sync.Mutex
	standIns  int
	// output also receives the node's processes' output (Options.Output).
	output io.Writer
}

// prepareNode does what must precede the control plane: it checks root and
// the binaries, takes the machine's node lock, cleans up after dead nodes,
// records what it will change, and makes the state folder, the bridge, the
// cgroup root, the registry with the sandbox image, the certificates and the
// configuration files.
func prepareNode(opts Options, binDir string) (n *realNode, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("devcluster: %w (containers, cgroups, a bridge and netfilter rules)", ErrNodeNeedsRoot)
	}
	if err := requireNodeFiles(binDir); err != nil {
		return nil, err
	}
	if opts.ClusterDNS {
		if err := requireFiles(binDir, corednsBin); err != nil {
			return nil, fmt.Errorf("%w (CoreDNS is built by `make node`)", err)
		}
	}
	lock, err := lockNodes(NodeLockWait())
	if err != nil {
		return nil, err
	}
	n = &realNode{lock: lock, binDir: binDir}
	defer func() {
		if err != nil {
			// The start error is the one to report; a failed cleanup keeps
			// the state folder for the next start to retry.
			_ = n.stop()
			n = nil
		}
	}()
	if err := cleanDeadNodes(); err != nil {
		return n, fmt.Errorf("devcluster: cleaning up after an earlier node: %w", err)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return n, err
	}
	n.id = hex.EncodeToString(b[:])
	if err := os.MkdirAll(NodeStateRoot, 0o700); err != nil {
		return n, fmt.Errorf("devcluster: %w", err)
	}
	n.layout = newNodeLayout(filepath.Join(NodeStateRoot, n.id))
	if err := os.Mkdir(n.layout.dir, 0o700); err != nil {
		return n, fmt.Errorf("devcluster: %w", err)
	}
	podCIDR, err := freePodCIDR()
	if err != nil {
		return n, err
	}
	gw := make(net.IP, 4)
	copy(gw, podCIDR.IP.To4())
	gw[3] = 1
	_, svc, _ := net.ParseCIDR(ServiceCIDR)
	dns := make(net.IP, 4)
	copy(dns, svc.IP.To4())
	dns[3] = 10
	n.net = nodeNet{bridge: nodePrefix + n.id, podCIDR: podCIDR, gateway: gw, dns: dns}
	n.rec = nodeRecord{
		Owner:      os.Getpid(),
		OwnerStart: processStart(os.Getpid()),
		Bridge:     n.net.bridge,
		CNINetwork: n.net.cniNetworkName(),
		CgroupRoot: "/" + nodePrefix + "node-" + n.id,
		BinDir:     binDir,
	}
	// Record before changing anything: cleanup reads this.
	if err := snapshotHost(&n.rec); err != nil {
		return n, err
	}
	if err := writeRecord(n.layout.dir, n.rec); err != nil {
		return n, fmt.Errorf("devcluster: %w", err)
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
	if n.port, err = freePort(n.net.gateway.String()); err != nil {
		return n, err
	}
	if n.proxyPorts[0], err = freePort("127.0.0.1"); err != nil {
		return n, err
	}
	if n.proxyPorts[1], err = freePort("127.0.0.1"); err != nil {
		return n, err
	}
	return n, n.writeConfig()
}

// podResolvConf is the resolv.conf the kubelet gives pods with dnsPolicy
// Default: the node's resolver with Options.ClusterDNS, no resolver at all
// otherwise.
func (n *realNode) podResolvConf() []byte {
	if n.resolver == nil {
		return nil
	}
	return []byte("nameserver " + n.net.gateway.String() + "\n")
}

// requireNodeFiles checks the node's binaries, host tools and CNI plugins.
func requireNodeFiles(binDir string) error {
	if err := requireFiles(binDir, containerdBin, shimBin, kubeletBin, kubeProxyBin, kubeRouterBin, pauseBin); err != nil {
		return fmt.Errorf("%w (the node's are built by `make node`)", err)
	}
	var missing []string
	for _, tool := range []string{"runc", "iptables", "ip6tables", "ipset", "nft", "ip", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(debianCNIDir, p)); err != nil {
			missing = append(missing, filepath.Join(debianCNIDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("devcluster: %v missing: run `make node` (it installs them from Debian): %w", missing, ErrMissingBinaries)
	}
	return nil
}

// writeConfig writes containerd's, the CNI's, the kubelet's and
// kube-proxy's configuration and links the CNI plugins.
func (n *realNode) writeConfig() error {
	l := n.layout
	conflist, err := cniConfList(n.net, l.cniCache)
	if err != nil {
		return err
	}
	err = writeFiles(map[string][]byte{
		l.containerdConfig: []byte(containerdConfigTOML(l, n.sandbox)),
		filepath.Join(l.cniConf, "10-openfief.conflist"): conflist,
		l.kubeletConfig: []byte(kubeletConfigYAML(l, n.net, n.port, n.certs.caFile, n.rec.CgroupRoot)),
		l.proxyConfig:   []byte(kubeProxyConfigYAML(l, n.net, RealNodeName, n.net.podCIDR.String(), n.proxyPorts[0], n.proxyPorts[1])),
		l.resolvConf:    n.podResolvConf(),
	})
	if err != nil {
		return err
	}
	for _, dir := range []string{l.cniBin, l.kubeletRoot, l.kubeletCerts, l.podLogs, l.volumePlugins, l.logs, l.shimSocketDir, l.runcRoot} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
	}
	for _, p := range cniPlugins {
		if err := os.Symlink(filepath.Join(debianCNIDir, p), filepath.Join(l.cniBin, p)); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
	}
	return nil
}

// configureAPIServer adds what a real kubelet and the pods need of the API
// server: the Node authorizer and NodeRestriction, the client certificate
// it presents to the kubelet, and serving the pods as on a real cluster
// (servePods: the bridge address, the kubernetes Service, ServiceAccount
// admission).
func (n *realNode) configureAPIServer(api *envtest.APIServer) error {
	if err := n.servePods(api); err != nil {
		return err
	}
	args := api.Configure()
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("kubelet-client-certificate", n.certs.apiServerClientCert)
	args.Set("kubelet-client-key", n.certs.apiServerClientKey)
	args.Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// controllerManagerArgs are the controller manager's extra flags: it gives
// the node its pod range, and its controllers act under their own
// ServiceAccounts (system:serviceaccount:kube-system:replicaset-controller,
// ...), as kubeadm's and kind's do, which deploy/admission's policy expects.
func (n *realNode) controllerManagerArgs() []string {
	return []string{
		"--use-service-account-credentials=true",
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + n.net.podCIDR.String(),
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + ServiceCIDR,
	}
}

// start runs containerd, the kubelet (until the node is Ready), kube-proxy
// and kube-router against the cluster's running control plane.
func (n *realNode) start(ctx context.Context, c *Cluster, opts Options) error {
	l := n.layout
	n.output = opts.Output
	env := n.processEnv()
	startOne := func(name string, args ...string) error {
		p, err := startProcessEnv(name, filepath.Join(n.binDir, name), args, env, filepath.Join(c.Dir, "logs"), opts.Output)
		if err != nil {
			return err
		}
		n.procs = append(n.procs, p)
		// A kill of this process makes the watchdog end it too; the pods and
		// the rest wait for CleanNodeLeftovers.
		if err := c.reaper.watch(p.cmd.Process.Pid); err != nil {
			return fmt.Errorf("devcluster: watchdog: %w", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	if err := startOne(containerdBin, "--config", l.containerdConfig); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", func(context.Context) (bool, error) {
		conn, err := net.Dial("unix", l.containerdSocket)
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	}); err != nil {
		return err
	}

	kubelet, err := c.env.AddUser(envtest.User{Name: "system:node:" + RealNodeName, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return fmt.Errorf("devcluster: kubelet identity: %w", err)
	}
	proxy, err := c.env.AddUser(envtest.User{Name: "system:kube-proxy"}, nil)
	if err != nil {
		return fmt.Errorf("devcluster: kube-proxy identity: %w", err)
	}
	router, err := c.env.AddUser(envtest.User{Name: kubeRouterUser}, nil)
	if err != nil {
		return fmt.Errorf("devcluster: kube-router identity: %w", err)
	}
	cs, err := c.Clientset()
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	if err := grantKubeRouter(ctx, cs); err != nil {
		return err
	}
	kubeconfigs := map[string][]byte{}
	for path, u := range map[string]*envtest.AuthenticatedUser{l.kubeletKubeconfig: kubelet, l.proxyKubeconfig: proxy, l.routerKubeconfig: router} {
		if kubeconfigs[path], err = u.KubeConfig(); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
	}
	if err := writeFiles(kubeconfigs); err != nil {
		return err
	}

	if err := startOne(kubeletBin,
		"--config="+l.kubeletConfig,
		"--kubeconfig="+l.kubeletKubeconfig,
		"--root-dir="+l.kubeletRoot,
		"--cert-dir="+l.kubeletCerts,
		"--hostname-override="+RealNodeName,
		"--node-ip="+n.net.gateway.String(),
	); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the real node to become Ready", func(ctx context.Context) (bool, error) {
		return fullReady(ctx, cs, []string{RealNodeName})
	}); err != nil {
		return err
	}

	if err := startOne(kubeProxyBin, "--config="+l.proxyConfig); err != nil {
		return err
	}
	if err := startOne(kubeRouterBin, n.kubeRouterArgs()...); err != nil {
		return err
	}
	// kube-router's firewall is in place once its FORWARD chain is hooked in;
	// kube-proxy once its table exists.
	if err := c.waitFor(ctx, "kube-proxy's and kube-router's rules", func(context.Context) (bool, error) {
		return routerHooked() && tableExists("ip", "kube-proxy"), nil
	}); err != nil {
		return err
	}
	if err := n.makeVolumes(ctx, cs, opts.Volumes); err != nil {
		return err
	}
	if opts.ClusterDNS {
		return n.startDNS(ctx, c, cs)
	}
	return nil
}

// processEnv is the environment of the node's processes: this process's,
// with the binary directory first on PATH.
func (n *realNode) processEnv() []string {
	return append(os.Environ(), "PATH="+n.binDir+":"+os.Getenv("PATH"))
}

// kubeRouterArgs are kube-router's flags, at start and at
// StartNetworkPolicy: only its firewall (no routing, no service proxy, no
// CNI), IPv4 only, no health or metrics port.
func (n *realNode) kubeRouterArgs() []string {
	return []string{
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--enable-cni=false",
		"--enable-ipv6=false",
		"--kubeconfig=" + n.layout.routerKubeconfig,
		"--hostname-override=" + RealNodeName,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--health-port=0",
		"--metrics-port=0",
	}
}

// stop ends the node and cleans up everything it did to the machine, then
// releases the machine's node lock.
func (n *realNode) stop() error {
	var errs []error
	// kube-router, kube-proxy and the kubelet first, politely, so they leave
	// no half-written rule.
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].name != containerdBin {
			n.procs[i].stop(10 * time.Second)
		}
	}
	if n.layout.dir != "" {
		errs = append(errs, cleanNode(n.layout.dir))
	}
	for _, p := range n.procs {
		p.stop(time.Second)
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

// TrustRegistry lets the real node pull from the registry host (host:port)
// over plain HTTP. It is an error on a cluster without a real node, or for
// a host that is neither on loopback nor the node's bridge address
// (NodeGateway), where a registry the pods also reach can listen.
func (c *Cluster) TrustRegistry(host string) error {
	if c.node == nil {
		return errors.New("devcluster: TrustRegistry needs a real node")
	}
	return c.node.trustRegistry(host)
}

// NodeRegistry returns the host:port of the real node's own loopback
// registry, which serves the sandbox image and takes the tests' images, or
// "" without a real node.
func (c *Cluster) NodeRegistry() string {
	if c.node == nil {
		return ""
	}
	return c.node.regHost
}

// NodeStateDir returns the real node's state folder, or "" without one.
func (c *Cluster) NodeStateDir() string {
	if c.node == nil {
		return ""
	}
	return c.node.layout.dir
}

// ClusterDNS returns the address the real node's kubelet gives pods as
// their cluster DNS server (CoreDNS answers there with Options.ClusterDNS,
// nothing otherwise), or nil without a real node.
func (c *Cluster) ClusterDNS() net.IP {
	if c.node == nil {
		return nil
	}
	return c.node.net.dns
}

// NodeGateway returns the real node's address on its bridge, which the pods
// can reach, or nil without a real node.
func (c *Cluster) NodeGateway() net.IP {
	if c.node == nil {
		return nil
	}
	return c.node.net.gateway
}
