package testutil

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MemoryCgroup is a memory cgroup a test created with a limit, for child
// processes that must run under a container's limit.
type MemoryCgroup struct {
	// Dir is the cgroup's directory under /sys/fs/cgroup.
	Dir string
	// Path is the cgroup's path as /proc/PID/cgroup names it.
	Path string
}

// NewMemoryCgroup creates a memory cgroup limited to limit bytes (cgroup v2
// when /sys/fs/cgroup is the unified hierarchy, the v1 memory controller
// otherwise) and removes it when the test ends; the processes put in it must
// have exited by then. It needs root: without it the test fails, saying so.
func NewMemoryCgroup(t testing.TB, limit int64) *MemoryCgroup {
	t.Helper()
	name := fmt.Sprintf("openfief-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	root, limitFile := "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root, limitFile = "/sys/fs/cgroup", "memory.max"
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create a memory cgroup (needs root and a writable %s): %v", root, err)
	}
	t.Cleanup(func() {
		// The kernel may take a moment to release an exited process.
		var err error
		for range 50 {
			if err = os.Remove(dir); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("remove cgroup %s: %v", dir, err)
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("limit cgroup %s: %v", dir, err)
	}
	return &MemoryCgroup{Dir: dir, Path: "/" + name}
}

// Add moves process pid into the cgroup.
func (c *MemoryCgroup) Add(pid int) error {
	return os.WriteFile(filepath.Join(c.Dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// WaitInMemoryCgroup waits, for at most timeout, until the calling process
// is in the memory cgroup at path (as /proc/self/cgroup names it), so a
// child its parent moves after starting it reads its limit only once
// moved.
func WaitInMemoryCgroup(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		in, err := inMemoryCgroup(path)
		if err != nil || in {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not in memory cgroup %s after %s", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inMemoryCgroup reports whether /proc/self/cgroup puts this process in
// path, on the v1 memory line or the v2 one.
func inMemoryCgroup(path string) (bool, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }() // read-only
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) == 3 && parts[2] == path && (parts[1] == "memory" || parts[0] == "0") {
			return true, nil
		}
	}
	return false, s.Err()
}
