package node

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// StateRoot is the folder under which every real node keeps its state
// folder, <StateRoot>/<id>; what is found there after a killed run is
// cleaned up by the next start ([CleanLeftovers]).
const StateRoot = "/run/openfief-node"

// nodeLockFile serialises real nodes on a machine: the kubelet and
// kube-router use names that are machine-wide (/var/lib/kubelet, the
// KUBE-ROUTER-* chains, the "kube-proxy" nft tables), so only one runs at a
// time, and leftovers are only cleaned while holding it.
const nodeLockFile = "/run/openfief-node.lock"

// nodePrefix starts the name of everything a node creates that has a name
// of our choosing: the bridge (of-<id>) and the cgroup root (of-node-<id>).
const nodePrefix = "of-"

// Sysctls the node changes (the kubelet sets the first six as its kernel
// defaults, setupKernelTunables in its container manager; the bridge plugin
// turns on forwarding; kube-proxy may turn on route_localnet): recorded
// before the start, written back by cleanup.
var nodeSysctls = []string{
	"kernel/panic",
	"kernel/panic_on_oops",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
}

// Machine-wide paths the kubelet, containerd's CNI cache and kube-router may
// create; cleanup removes those that did not exist before the node started.
var nodeHostPaths = []string{
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni",
	"/var/lib/kube-router",
	"/run/containerd",
}

// nodeRecord is what cleanup needs to undo a node, written to state.json in
// the state folder before the node changes anything on the machine.
type nodeRecord struct {
	// Owner is the process that started the node; a state folder whose owner
	// is gone is a leftover.
	Owner int `json:"owner"`
	// OwnerStart is the owner's start time (field 22 of /proc/PID/stat), so a
	// reused PID is not taken for the owner.
	OwnerStart string `json:"ownerStart"`
	// Bridge is the node's bridge, of-<id>.
	Bridge string `json:"bridge"`
	// CNINetwork names the CNI network (host-local and containerd caches).
	CNINetwork string `json:"cniNetwork"`
	// CgroupRoot is the kubelet's cgroup root, /of-node-<id>, in every
	// hierarchy.
	CgroupRoot string `json:"cgroupRoot"`
	// BinDir holds kube-proxy, for `kube-proxy --cleanup`.
	BinDir string `json:"binDir"`
	// Sysctls maps each of nodeSysctls to its value before the start.
	Sysctls map[string]string `json:"sysctls"`
	// Existed lists the nodeHostPaths that existed before the start.
	Existed []string `json:"existed"`
	// NFTables lists the nft tables ("family name") before the start.
	NFTables []string `json:"nftTables"`
}

// record writes the node's record to its state folder, before the node
// changes anything on the machine: its owner (this process), names, binary
// directory and what it may change as it was.
func (n *Node) record() error {
	n.rec = nodeRecord{
		Owner:      os.Getpid(),
		OwnerStart: processStart(os.Getpid()),
		Bridge:     n.net.bridge,
		CNINetwork: n.net.cniNetworkName(),
		CgroupRoot: "/" + nodePrefix + "node-" + n.id,
		BinDir:     n.opts.BinDir,
	}
	if err := snapshotHost(&n.rec); err != nil {
		return err
	}
	if err := writeRecord(n.layout.dir, n.rec); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	return nil
}

// snapshotHost records the sysctls, host paths and nft tables the node may
// change.
func snapshotHost(rec *nodeRecord) error {
	rec.Sysctls = map[string]string{}
	for _, k := range nodeSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("devcluster: reading sysctl %s: %w", k, err)
		}
		rec.Sysctls[k] = strings.TrimSpace(string(v))
	}
	for _, p := range nodeHostPaths {
		if _, err := os.Lstat(p); err == nil {
			rec.Existed = append(rec.Existed, p)
		}
	}
	tables, err := nftTables()
	if err != nil {
		return err
	}
	rec.NFTables = tables
	return nil
}

// writeRecord writes rec to dir/state.json.
func writeRecord(dir string, rec nodeRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "state.json"), data, 0o600)
}

// readRecord reads dir/state.json.
func readRecord(dir string) (nodeRecord, error) {
	var rec nodeRecord
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(data, &rec)
}

// processStart returns field 22 of /proc/pid/stat, the process's start time
// in clock ticks since boot, or "" if there is no such process.
func processStart(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// ownerAlive reports whether the process that started the node of rec still
// runs.
func (rec nodeRecord) ownerAlive() bool {
	return rec.Owner > 0 && processStart(rec.Owner) == rec.OwnerStart
}

// nftTables lists the nft tables as "family name", sorted as nft prints them.
func nftTables() ([]string, error) {
	out, err := run("nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	var tables []string
	for _, line := range strings.Split(out, "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables, nil
}

// run runs a host command and returns its standard output; the error names
// the command and carries its standard error.
func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("devcluster: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
