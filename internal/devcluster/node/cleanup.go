package node

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CleanLeftovers cleans up after every real node whose starting process
// is gone (a killed test, a crashed `openfief dev`): it does for each state
// folder under StateRoot what Stop would have done. A node whose owner
// still runs is left alone. It takes the machine's node lock, waiting at
// most timeout.
func CleanLeftovers(timeout time.Duration) error {
	lock, err := lockNodes(timeout)
	if err != nil {
		return err
	}
	defer unlockNodes(lock)
	return cleanDeadNodes()
}

// cleanDeadNodes is CleanLeftovers with the lock held.
func cleanDeadNodes() error {
	entries, err := os.ReadDir(StateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(StateRoot, e.Name())
		if rec, err := readRecord(dir); err == nil && rec.ownerAlive() && rec.Owner != os.Getpid() {
			continue
		}
		errs = append(errs, cleanNode(dir))
	}
	return errors.Join(errs...)
}

// cleanNodesOfDeadOwners cleans up after each node whose record names an
// owner that is gone, with the lock held. Unlike cleanDeadNodes it leaves
// this process's nodes and folders without a readable record alone, so
// that they show as leftovers.
func cleanNodesOfDeadOwners() error {
	entries, err := os.ReadDir(StateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(StateRoot, e.Name())
		if rec, err := readRecord(dir); err == nil && !rec.ownerAlive() {
			errs = append(errs, cleanNode(dir))
		}
	}
	return errors.Join(errs...)
}

// cleanNode undoes everything the node with state folder dir did to the
// machine, in the order that lets each step succeed: stop the kubelet and
// the other node processes, kill every process in the node's cgroups (the
// pods), the shims and containerd, remove kube-proxy's and kube-router's
// rules and ipsets, unmount what is mounted under dir, delete the bridge
// and the veths on it, remove the cgroup folders, restore the sysctls and
// remove the machine-wide paths that did not exist before, then dir itself.
// It goes on after a failed step and returns every error; then it keeps dir
// so that a later cleanup tries again.
func cleanNode(dir string) error {
	rec, recErr := readRecord(dir)
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Processes first, kubelet before the containers so it restarts none.
	killMentioning(dir, "kubelet")
	if recErr == nil && rec.CgroupRoot != "" {
		add(killCgroup(rec.CgroupRoot))
	}
	killMentioning(dir, "")
	add(unmountUnder(dir))
	if recErr == nil {
		add(cleanNodeNetwork(rec))
		if rec.CgroupRoot != "" {
			add(removeCgroup(rec.CgroupRoot))
		}
		add(restoreSysctls(rec.Sysctls))
		add(removeHostPaths(rec))
	} else if !errors.Is(recErr, os.ErrNotExist) {
		add(fmt.Errorf("devcluster: %s: %w (its network, cgroups and sysctls were not cleaned)", dir, recErr))
	}
	if len(errs) > 0 {
		// Keep the state folder (state.json) so the next start, or
		// hack/dev/node-leftovers --clean, tries again.
		return errors.Join(errs...)
	}
	return os.RemoveAll(dir)
}

// killMentioning SIGKILLs every process whose command line mentions dir
// (and, if name is not empty, whose command is name), and waits up to 5 s
// for them to go.
func killMentioning(dir, name string) {
	for range 50 {
		pids := processesMentioning(dir, name)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesMentioning lists the processes (not this one) whose command line
// mentions s, and whose command's base name is name when name is not empty.
func processesMentioning(s, name string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		if name != "" {
			argv0, _, _ := strings.Cut(string(cmdline), "\x00")
			if filepath.Base(argv0) != name {
				continue
			}
		}
		// A zombie has an empty command line, so it never matches.
		pids = append(pids, pid)
	}
	return pids
}

// cgroupHierarchies lists the cgroup mounts under /sys/fs/cgroup (the v1
// hierarchies and the unified one), or /sys/fs/cgroup itself on a pure v2
// machine.
func cgroupHierarchies() []string {
	var dirs []string
	mounts, _ := mountPoints()
	for _, m := range mounts {
		if (m.fstype == "cgroup" || m.fstype == "cgroup2") && strings.HasPrefix(m.point, "/sys/fs/cgroup") {
			dirs = append(dirs, m.point)
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// killCgroup SIGKILLs every process in the cgroup tree root of every
// hierarchy until none is left (at most 10 s).
func killCgroup(root string) error {
	for range 100 {
		left := 0
		for _, h := range cgroupHierarchies() {
			_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						left++
					}
				}
				return nil
			})
		}
		if left == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("devcluster: processes are left in the cgroups %s", root)
}

// removeCgroup removes the cgroup tree root from every hierarchy, deepest
// folders first.
func removeCgroup(root string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("devcluster: removing cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ point, fstype string }

// mountPoints reads this process's mount table.
func mountPoints() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	var ms []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		ms = append(ms, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return ms, sc.Err()
}

// unescapeMount decodes the octal escapes (\040 for a space) of a mount
// point in mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists the mount points at or under dir, deepest first.
func mountsUnder(dir string) []string {
	ms, _ := mountPoints()
	var under []string
	for _, m := range ms {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			under = append(under, m.point)
		}
	}
	slices.SortFunc(under, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(under)
}

// unmountUnder detaches every mount at or under dir (network namespaces,
// the kubelet's volumes and its root folder, containerd's rootfs mounts),
// repeating while mounts stacked on one another remain.
func unmountUnder(dir string) error {
	for range 10 {
		points := mountsUnder(dir)
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("devcluster: mounts left under %s: %v", dir, left)
	}
	return nil
}

// restoreSysctls writes back the values snapshotHost recorded.
func restoreSysctls(values map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(values)) {
		path := filepath.Join("/proc/sys", k)
		cur, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(cur)) == values[k] {
			continue
		}
		if err := os.WriteFile(path, []byte(values[k]+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("devcluster: restoring sysctl %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// removeHostPaths removes the machine-wide paths the node created.
func removeHostPaths(rec nodeRecord) error {
	var errs []error
	for _, p := range nodeHostPaths {
		if slices.Contains(rec.Existed, p) {
			continue
		}
		// Mounts the kubelet made in its default root (device-plugins).
		if err := unmountUnder(p); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("devcluster: %w", err))
		}
	}
	return errors.Join(errs...)
}
