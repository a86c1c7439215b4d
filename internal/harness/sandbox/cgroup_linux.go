package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroup is the sandbox's own cgroup: one folder on a cgroup v2 machine,
// or one in each of the memory, cpu, cpuacct and pids hierarchies of
// cgroup v1 (a machine whose unified hierarchy holds none of them, as a
// "hybrid" systemd machine's does not).
type cgroup struct {
	v2   bool
	dirs map[string]string // controller ("memory", "cpu", "cpuacct", "pids") -> its folder
	made []string          // the folders made, in the order made
}

var cgroupSeq atomic.Int64

// newCgroup makes the sandbox's cgroup with the limits l. On cgroup v2 it
// is a child of the hierarchy's root, where the memory, cpu and pids
// controllers can be enabled (a cgroup holding processes cannot hand them
// down); on v1 it is a child of the harness's own cgroup in each
// hierarchy, so the harness's bounds hold the sandbox too.
func newCgroup(l Limits) (*cgroup, error) {
	name := fmt.Sprintf("openfief-sandbox-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, fmt.Errorf("%w: /sys/fs/cgroup: %v", ErrNoCgroup, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return newCgroup2("/sys/fs/cgroup", name, l)
	}
	return newCgroup1(name, l)
}

func newCgroup2(root, name string, l Limits) (*cgroup, error) {
	for _, c := range []string{"+memory", "+cpu", "+pids"} {
		_ = os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte(c), 0)
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	c := &cgroup{v2: true, dirs: map[string]string{}, made: []string{dir}}
	have, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	for _, ctl := range []string{"memory", "cpu", "pids"} {
		if !slices.Contains(strings.Fields(string(have)), ctl) {
			_ = c.remove()
			return nil, fmt.Errorf("%w: the %s controller is not enabled in %s/cgroup.subtree_control "+
				"(a cgroup v2 that holds processes cannot hand controllers down)", ErrNoCgroup, ctl, root)
		}
		c.dirs[ctl] = dir
	}
	c.dirs["cpuacct"] = dir
	err := errors.Join(
		c.write("memory", "memory.max", strconv.FormatInt(l.MemoryBytes, 10)),
		c.write("cpu", "cpu.max", strconv.FormatInt(l.CPUMilli*100, 10)+" 100000"),
		c.write("pids", "pids.max", strconv.FormatInt(l.Pids, 10)),
	)
	_ = c.write("memory", "memory.swap.max", "0") // absent without swap accounting
	if err != nil {
		_ = c.remove()
		return nil, err
	}
	return c, nil
}

func newCgroup1(name string, l Limits) (*cgroup, error) {
	mounts, err := cgroup1Mounts()
	if err != nil {
		return nil, err
	}
	c := &cgroup{dirs: map[string]string{}}
	for _, ctl := range []string{"memory", "cpu", "cpuacct", "pids"} {
		parent, ok := mounts[ctl]
		if !ok {
			_ = c.remove()
			return nil, fmt.Errorf("%w: neither cgroup v2 nor a cgroup v1 %s hierarchy is mounted", ErrNoCgroup, ctl)
		}
		dir := filepath.Join(parent, name)
		if !slices.Contains(c.made, dir) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				_ = c.remove()
				return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
			}
			c.made = append(c.made, dir)
		}
		c.dirs[ctl] = dir
	}
	err = errors.Join(
		c.write("memory", "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)),
		c.write("cpu", "cpu.cfs_period_us", "100000"),
		c.write("cpu", "cpu.cfs_quota_us", strconv.FormatInt(l.CPUMilli*100, 10)),
		c.write("pids", "pids.max", strconv.FormatInt(l.Pids, 10)),
	)
	// Swap counts against the limit where the kernel accounts for it.
	_ = c.write("memory", "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10))
	_ = c.write("memory", "memory.swappiness", "0")
	if err != nil {
		_ = c.remove()
		return nil, err
	}
	return c, nil
}

// cgroup1Mounts maps each cgroup v1 controller to the harness's own cgroup
// folder in the hierarchy that holds it.
func cgroup1Mounts() (map[string]string, error) {
	own := map[string]string{} // controller -> this process's path in its hierarchy
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	for line := range strings.Lines(string(raw)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			own[ctl] = f[2]
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 || after[0] != "cgroup" {
			continue
		}
		root, point := fields[3], fields[4]
		for _, ctl := range strings.Split(after[2], ",") {
			p, mine := own[ctl]
			if !mine {
				continue
			}
			rel, found := strings.CutPrefix(p, root)
			if !found {
				rel = ""
			}
			out[ctl] = filepath.Join(point, rel)
		}
	}
	return out, nil
}

// write writes one of a controller's files.
func (c *cgroup) write(ctl, file, value string) error {
	if err := os.WriteFile(filepath.Join(c.dirs[ctl], file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

// read reads one of a controller's files.
func (c *cgroup) read(ctl, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dirs[ctl], file))
	return strings.TrimSpace(string(b)), err
}

// add moves a process into the cgroup.
func (c *cgroup) add(pid int) error {
	for _, d := range c.made {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
	}
	return nil
}

// usage reads the peak memory, the CPU time and whether the kernel's OOM
// killer ended a process of the cgroup.
func (c *cgroup) usage() (Usage, error) {
	var u Usage
	var errs []error
	if c.v2 {
		peak, err := c.read("memory", "memory.peak") // since Linux 5.19
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup memory.peak: %w", err))
		}
		u.PeakMemoryBytes, _ = strconv.ParseInt(peak, 10, 64)
		stat, err := c.read("cpu", "cpu.stat")
		errs = append(errs, err)
		u.CPUSeconds = float64(keyed(stat, "usage_usec")) / 1e6
		events, err := c.read("memory", "memory.events")
		errs = append(errs, err)
		u.OOMKilled = keyed(events, "oom_kill") > 0
		return u, errors.Join(errs...)
	}
	peak, err := c.read("memory", "memory.max_usage_in_bytes")
	errs = append(errs, err)
	u.PeakMemoryBytes, _ = strconv.ParseInt(peak, 10, 64)
	ns, err := c.read("cpuacct", "cpuacct.usage")
	errs = append(errs, err)
	n, _ := strconv.ParseInt(ns, 10, 64)
	u.CPUSeconds = float64(n) / 1e9
	oom, err := c.read("memory", "memory.oom_control")
	errs = append(errs, err)
	u.OOMKilled = keyed(oom, "oom_kill") > 0
	return u, errors.Join(errs...)
}

// keyed reads "key value" lines.
func keyed(s, key string) int64 {
	for line := range strings.Lines(s) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		if k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// kill SIGKILLs every process left in the cgroup.
func (c *cgroup) kill() {
	if c.v2 && len(c.made) > 0 {
		_ = os.WriteFile(filepath.Join(c.made[0], "cgroup.kill"), []byte("1"), 0) // since Linux 5.14
	}
	for _, d := range c.made {
		procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// remove kills what is left and removes the folders, waiting up to 5 s
// for the kernel to let go of the last processes.
func (c *cgroup) remove() error {
	var errs []error
	for i := len(c.made) - 1; i >= 0; i-- {
		d := c.made[i]
		var err error
		for range 100 {
			err = unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			c.kill()
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	c.made = nil
	return errors.Join(errs...)
}
