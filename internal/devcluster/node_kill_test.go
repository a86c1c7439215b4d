//go:build cluster

package devcluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// nodeKillChildEnv makes the test binary act as a process that starts a real
// node, runs a pod on it and is then killed.
const nodeKillChildEnv = "DEVCLUSTER_NODE_KILL_CHILD"

// TestRealNodeCleanedAfterKill starts a real node with a running pod in a
// child process, kills that process with SIGKILL, and checks that
// CleanNodeLeftovers (what the next start does) leaves nothing of it.
func TestRealNodeCleanedAfterKill(t *testing.T) {
	if os.Getenv(nodeKillChildEnv) == "1" {
		runNodeKillChild(t)
		return
	}
	ownRealNode(t)

	cmd, dir := startKillableChild(t, "TestRealNodeCleanedAfterKill", nodeKillChildEnv, "READY ")
	assertSeesRunningNode(t, dir)
	if podProcesses(t, dir) == 0 || len(processesMentioning(dir)) == 0 {
		t.Fatal("no pod or node process runs before the kill")
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: its exit status says so
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("state folder %s gone before the cleanup: %v", dir, err)
	}
	// The watchdog ends the node's processes, the pods and the shims
	// included, without waiting for a cleanup. It signals them at once; the
	// bound leaves room for a machine under load (a shim outlived 10 s once
	// at a load average of 26 on two cores).
	const bound = 30 * time.Second
	deadline := time.Now().Add(bound)
	for {
		procs := processesMentioning(dir)
		pods := podProcesses(t, dir)
		if len(procs) == 0 && pods == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the kill, still running: %v and %d processes in the node's cgroups", bound, procs, pods)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The killed node's lock went with it, so another package's real node
	// may take the machine first (make test runs them side by side); that
	// node's start cleans up after the killed one, and this waits as long
	// as any real node waits for the lock.
	start := time.Now()
	if err := devcluster.CleanNodeLeftovers(devcluster.NodeLockWait()); err != nil {
		t.Fatalf("CleanNodeLeftovers: %v", err)
	}
	t.Logf("cleaned up after the killed node in %v", time.Since(start).Round(time.Millisecond))
	assertNoLeftovers(t)
}

// runNodeKillChild starts a real node with a pod, prints READY and its state
// folder, and waits to be killed.
func runNodeKillChild(t *testing.T) {
	c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Full, Node: devcluster.NodeReal, StartTimeout: 2 * time.Minute})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	image := pushProbe(t, c.NodeRegistry())
	cs, err := c.Clientset()
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	runProbePod(t, cs, image)
	fmt.Println("READY", c.NodeStateDir())
	time.Sleep(time.Hour)
}

// podProcesses counts the processes in the memory cgroup tree of the node
// whose state folder is dir (the pods).
func podProcesses(t *testing.T, dir string) int {
	t.Helper()
	root := filepath.Join("/sys/fs/cgroup/memory", "of-node-"+filepath.Base(dir))
	n := 0
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
			data, _ := os.ReadFile(path)
			n += len(strings.Fields(string(data)))
		}
		return nil
	})
	return n
}
