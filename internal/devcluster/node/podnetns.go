package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// PodNetNS returns the network namespace of the real node's pod with the
// given UID, as a path (/proc/PID/ns/net of a process of the pod) that
// `nsenter --net=PATH` or setns takes. It reads the node's cgroups, not the
// kubelet or containerd, so a test can look into a pod while either is
// down.
func (n *Node) PodNetNS(uid string) (string, error) {
	pids, err := n.PodPIDs(uid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d/ns/net", pids[0]), nil
}

// PodPIDs returns the processes of the real node's pod with the given UID,
// every container's, sorted, as the node's cgroups list them (a fault test
// kills one of them as a crash would). It fails when the pod has none.
func (n *Node) PodPIDs(uid string) ([]int, error) {
	if uid == "" || strings.ContainsAny(uid, "/.") {
		return nil, fmt.Errorf("devcluster: %q is not a pod UID", uid)
	}
	want := "/pod" + uid
	var pids []int
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, n.rec.CgroupRoot), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return filepath.SkipDir
			}
			if d.IsDir() || d.Name() != "cgroup.procs" || !strings.Contains(path, want) {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if p, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, p) {
					pids = append(pids, p)
				}
			}
			return nil
		})
		if len(pids) > 0 {
			break
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("devcluster: no process of pod %s in the node's cgroups", uid)
	}
	slices.Sort(pids)
	return pids, nil
}
