package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PodNetNS returns the network namespace of the real node's pod with the
// given UID, as a path (/proc/PID/ns/net of a process of the pod) that
// `nsenter --net=PATH` or setns takes. It reads the node's cgroups, not the
// kubelet or containerd, so a test can look into a pod while either is
// down.
func (n *Node) PodNetNS(uid string) (string, error) {
	if uid == "" || strings.ContainsAny(uid, "/.") {
		return "", fmt.Errorf("devcluster: %q is not a pod UID", uid)
	}
	want := "pod" + uid
	for _, h := range cgroupHierarchies() {
		pid := 0
		_ = filepath.WalkDir(filepath.Join(h, n.rec.CgroupRoot), func(path string, d os.DirEntry, err error) error {
			if err != nil || pid != 0 {
				return filepath.SkipDir
			}
			if d.IsDir() || d.Name() != "cgroup.procs" || !strings.Contains(path, "/"+want) {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if p, err := strconv.Atoi(f); err == nil {
					pid = p
					return filepath.SkipAll
				}
			}
			return nil
		})
		if pid != 0 {
			return fmt.Sprintf("/proc/%d/ns/net", pid), nil
		}
	}
	return "", fmt.Errorf("devcluster: no process of pod %s in the node's cgroups", uid)
}
