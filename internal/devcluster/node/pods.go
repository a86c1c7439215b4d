package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PodTraces lists what of one pod is still on the real node, one line each:
// the kubelet's folder of the pod, the runc state of each of its containers
// (containerIDs as the pod's status names them, "containerd://<id>" or
// the bare id) and every process in the pod's cgroup, its sandbox's
// included. It is empty once the kubelet and containerd have removed the
// pod, and nil for an empty UID. Tests check with it that a deleted
// pod's containers are gone from the machine, not only from the API.
func (n *Node) PodTraces(podUID string, containerIDs []string) []string {
	if podUID == "" {
		return nil
	}
	l := n.layout
	var left []string
	if dir := filepath.Join(l.kubeletRoot, "pods", podUID); exists(dir) {
		left = append(left, "kubelet folder "+dir)
	}
	for _, id := range containerIDs {
		id = strings.TrimPrefix(id, "containerd://")
		if id == "" {
			continue
		}
		// The runc shim keeps a container's state under its root, in a
		// folder per containerd namespace (the CRI's is k8s.io).
		if dir := filepath.Join(l.runcRoot, "k8s.io", id); exists(dir) {
			left = append(left, "runc state "+dir)
		}
	}
	for _, pid := range processesInCgroup("pod" + podUID) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		left = append(left, fmt.Sprintf("process %d %s in the pod's cgroup", pid, argv0))
	}
	return left
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// processesInCgroup lists the processes whose cgroup path, in any
// hierarchy, has the element name (the kubelet's cgroupfs driver names a
// pod's cgroup pod<uid>).
func processesInCgroup(name string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue // gone meanwhile
		}
		for line := range strings.Lines(string(raw)) {
			// hierarchy-ID:controllers:path
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) == 3 && hasElement(parts[2], name) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// hasElement reports whether the slash-separated path has the element name.
func hasElement(path, name string) bool {
	for el := range strings.SplitSeq(path, "/") {
		if el == name {
			return true
		}
	}
	return false
}
