package node

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nodeLayout names every file and folder of one real node; all of them are
// under its state folder, so removing that folder removes them all.
type nodeLayout struct {
	dir string // the state folder, <stateRoot>/<id>

	containerdRoot, containerdState, containerdSocket, containerdTTRPC string
	shimSocketDir, runcRoot, certsD, containerdConfig, containerdOpt   string
	cniBin, cniConf, cniCache                                          string
	kubeletRoot, kubeletCerts, kubeletConfig, kubeletKubeconfig        string
	podLogs, volumePlugins, resolvConf, volumes                        string
	proxyConfig, proxyKubeconfig, routerKubeconfig                     string
	logs                                                               string
}

// newNodeLayout returns the layout of the state folder dir.
func newNodeLayout(dir string) nodeLayout {
	j := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }
	return nodeLayout{
		dir:               dir,
		containerdRoot:    j("containerd", "root"),
		containerdState:   j("containerd", "state"),
		containerdSocket:  j("containerd", "containerd.sock"),
		containerdTTRPC:   j("containerd", "containerd.sock.ttrpc"),
		shimSocketDir:     j("s"),
		runcRoot:          j("runc"),
		certsD:            j("containerd", "certs.d"),
		containerdOpt:     j("containerd", "opt"),
		containerdConfig:  j("containerd", "config.toml"),
		cniBin:            j("cni", "bin"),
		cniConf:           j("cni", "net.d"),
		cniCache:          j("cni", "cache"),
		kubeletRoot:       j("kubelet"),
		kubeletCerts:      j("kubelet-pki"),
		kubeletConfig:     j("kubelet-config.yaml"),
		kubeletKubeconfig: j("kubelet.kubeconfig"),
		podLogs:           j("pods"),
		volumePlugins:     j("volume-plugins"),
		resolvConf:        j("resolv.conf"),
		volumes:           j("pv"),
		proxyConfig:       j("kube-proxy-config.yaml"),
		proxyKubeconfig:   j("kube-proxy.kubeconfig"),
		routerKubeconfig:  j("kube-router.kubeconfig"),
		logs:              j("logs"),
	}
}

// clusterDomain is the DNS domain of the cluster's Services.
const clusterDomain = "cluster.local"

// nodeNet is the node's addressing: one bridge of ours, the pods' /24 on
// it (its first address is the gateway and the node's own address), and the
// Service range.
type nodeNet struct {
	bridge  string     // of-<id>
	podCIDR *net.IPNet // e.g. 10.244.0.0/24
	gateway net.IP     // first address of podCIDR, on the bridge
	dns     net.IP     // the cluster DNS Service address (nothing answers it)
	// serviceCIDR is the cluster's Service range, which the pods route to
	// the node.
	serviceCIDR string
}

// cniNetworkName is the CNI network's name, which host-local uses as the
// folder of its leases under /var/lib/cni/networks.
func (n nodeNet) cniNetworkName() string { return n.bridge }

// containerdConfigTOML renders containerd's configuration (version 4, as
// containerd 2.4 reads it): every path in the state folder, the CRI with
// restrict_oom_score_adj (root here lacks CAP_SYS_RESOURCE), cgroupfs, the
// pinned sandbox image, CNI from the node's folders and certs.d for the
// loopback registries (docs/node.md).
func containerdConfigTOML(l nodeLayout, sandboxImage string) string {
	q := strconv.Quote
	return strings.Join([]string{
		`version = 4`,
		`root = ` + q(l.containerdRoot),
		`state = ` + q(l.containerdState),
		``,
		`[plugins]`,
		`  [plugins.'io.containerd.server.v1.grpc']`,
		`    address = ` + q(l.containerdSocket),
		`  [plugins.'io.containerd.server.v1.ttrpc']`,
		`    address = ` + q(l.containerdTTRPC),
		`  [plugins.'io.containerd.shim.v1.manager']`,
		`    socket_dir = ` + q(l.shimSocketDir),
		// containerd's opt plugin makes <path>/bin and <path>/lib at start
		// and puts them first on its PATH and LD_LIBRARY_PATH: by default
		// /opt/containerd, machine-wide and never removed.
		`  [plugins.'io.containerd.internal.v1.opt']`,
		`    path = ` + q(l.containerdOpt),
		`  [plugins.'io.containerd.nri.v1.nri']`,
		`    disable = true`,
		`  [plugins.'io.containerd.transfer.v1.local']`,
		`    config_path = ` + q(l.certsD),
		`  [plugins.'io.containerd.cri.v1.images']`,
		`    snapshotter = "overlayfs"`,
		`    [plugins.'io.containerd.cri.v1.images'.pinned_images]`,
		`      sandbox = ` + q(sandboxImage),
		`    [plugins.'io.containerd.cri.v1.images'.registry]`,
		`      config_path = ` + q(l.certsD),
		`  [plugins.'io.containerd.cri.v1.runtime']`,
		`    restrict_oom_score_adj = true`,
		`    netns_mounts_under_state_dir = true`,
		`    enable_selinux = false`,
		`    [plugins.'io.containerd.cri.v1.runtime'.containerd]`,
		`      default_runtime_name = "runc"`,
		`      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]`,
		`        runtime_type = "io.containerd.runc.v2"`,
		`        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]`,
		`          BinaryName = "runc"`,
		`          Root = ` + q(l.runcRoot),
		`          SystemdCgroup = false`,
		`    [plugins.'io.containerd.cri.v1.runtime'.cni]`,
		`      bin_dirs = [` + q(l.cniBin) + `]`,
		`      conf_dir = ` + q(l.cniConf),
		`      max_conf_num = 1`,
		`  [plugins.'io.containerd.grpc.v1.cri']`,
		`    stream_server_address = "127.0.0.1"`,
		`    stream_server_port = "0"`,
		``,
	}, "\n")
}

// hostsTOML lets containerd pull from the loopback registry host over plain
// HTTP.
func hostsTOML(host string) string {
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
}

// cniConfList renders the CNI network: the bridge plugin on the node's own
// bridge with host-local addresses from the pod range, and portmap. Pods get
// no default route: only the bridge's /24, the Service range (through the
// node, where kube-proxy translates it) and StandInPrefix (the stand-ins for
// outside servers, addresses of the node itself), so no pod packet is
// forwarded off the machine whatever the policies say.
func cniConfList(n nodeNet, cacheDir string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.cniNetworkName(),
		"plugins": []any{
			map[string]any{
				"type":         "bridge",
				"bridge":       n.bridge,
				"isGateway":    true,
				"ipMasq":       false,
				"hairpinMode":  true,
				"forceAddress": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.podCIDR.String(), "gateway": n.gateway.String()}}},
					"routes":  []map[string]string{{"dst": n.serviceCIDR}, {"dst": StandInPrefix.String()}},
					"dataDir": cacheDir,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// PodPidsLimit is how many processes and threads one pod on the real node
// may hold (the kubelet's podPidsLimit): a plugin that forks without bound
// stops there, and the node keeps its process table. The platform's pods
// use a few dozen threads each.
const PodPidsLimit = 512

// kubeletConfigYAML renders the kubelet's configuration for this machine
// (docs/node.md): cgroup v1 allowed, cgroupfs under the node's own cgroup
// root, listening only on the node address, no anonymous access, kernel
// defaults set by the kubelet (recorded before and restored after), and at
// most PodPidsLimit processes in a pod.
func kubeletConfigYAML(l nodeLayout, n nodeNet, port int, clientCA, cgroupRoot string) string {
	q := strconv.Quote
	return strings.Join([]string{
		`apiVersion: kubelet.config.k8s.io/v1beta1`,
		`kind: KubeletConfiguration`,
		`failCgroupV1: false`,
		`cgroupDriver: cgroupfs`,
		`cgroupRoot: ` + q(cgroupRoot),
		`cgroupsPerQOS: true`,
		`enforceNodeAllocatable: ["pods"]`,
		`containerRuntimeEndpoint: ` + q("unix://"+l.containerdSocket),
		`imageServiceEndpoint: ` + q("unix://"+l.containerdSocket),
		`address: ` + q(n.gateway.String()),
		`port: ` + strconv.Itoa(port),
		`readOnlyPort: 0`,
		`healthzPort: 0`,
		`authentication:`,
		`  anonymous: {enabled: false}`,
		`  webhook: {enabled: true}`,
		`  x509: {clientCAFile: ` + q(clientCA) + `}`,
		`authorization:`,
		`  mode: Webhook`,
		`clusterDNS: [` + q(n.dns.String()) + `]`,
		`clusterDomain: ` + clusterDomain,
		`resolvConf: ` + q(l.resolvConf),
		`podLogsDir: ` + q(l.podLogs),
		`volumePluginDir: ` + q(l.volumePlugins),
		`failSwapOn: false`,
		`protectKernelDefaults: false`,
		`makeIPTablesUtilChains: false`,
		`serializeImagePulls: false`,
		`imageGCHighThresholdPercent: 100`,
		`evictionHard: {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"}`,
		`maxPods: 50`,
		`podPidsLimit: ` + strconv.Itoa(PodPidsLimit),
		`registerNode: true`,
		`syncFrequency: 10s`,
		``,
	}, "\n")
}

// kubeProxyConfigYAML renders kube-proxy's configuration in nftables mode:
// its rules live in two tables of its own ("ip kube-proxy", "ip6
// kube-proxy") that cleanup deletes whole, and, unlike iptables mode, it does
// not turn on route_localnet. Conntrack sysctls are left alone.
func kubeProxyConfigYAML(l nodeLayout, n nodeNet, nodeName, clusterCIDR string, healthzPort, metricsPort int) string {
	q := strconv.Quote
	return strings.Join([]string{
		`apiVersion: kubeproxy.config.k8s.io/v1alpha1`,
		`kind: KubeProxyConfiguration`,
		`mode: nftables`,
		`clusterCIDR: ` + q(clusterCIDR),
		`hostnameOverride: ` + q(nodeName),
		`bindAddress: ` + q(n.gateway.String()),
		`healthzBindAddress: ` + q("127.0.0.1:"+strconv.Itoa(healthzPort)),
		`metricsBindAddress: ` + q("127.0.0.1:"+strconv.Itoa(metricsPort)),
		`clientConnection: {kubeconfig: ` + q(l.proxyKubeconfig) + `}`,
		`conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}`,
		`nodePortAddresses: [` + q(n.podCIDR.String()) + `]`,
		``,
	}, "\n")
}

// writeFiles writes each path's content (mode 0600), making folders.
func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
	}
	return nil
}

// writeConfig writes containerd's, the CNI's, the kubelet's and
// kube-proxy's configuration and links the CNI plugins.
func (n *Node) writeConfig() error {
	l := n.layout
	conflist, err := cniConfList(n.net, l.cniCache)
	if err != nil {
		return err
	}
	err = writeFiles(map[string][]byte{
		l.containerdConfig: []byte(containerdConfigTOML(l, n.sandbox)),
		filepath.Join(l.cniConf, "10-openfief.conflist"): conflist,
		l.kubeletConfig: []byte(kubeletConfigYAML(l, n.net, n.port, n.certs.caFile, n.rec.CgroupRoot)),
		l.proxyConfig:   []byte(kubeProxyConfigYAML(l, n.net, Name, n.net.podCIDR.String(), n.proxyPorts[0], n.proxyPorts[1])),
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

// podResolvConf is the resolv.conf the kubelet gives pods with dnsPolicy
// Default: the node's resolver with Options.ClusterDNS, no resolver at all
// otherwise.
func (n *Node) podResolvConf() []byte {
	if n.resolver == nil {
		return nil
	}
	return []byte("nameserver " + n.net.gateway.String() + "\n")
}
