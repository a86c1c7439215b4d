//go:build cluster

package devcluster_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// orphanChildEnv makes the test binary act as a process that starts a
// cluster and then dies without stopping it.
const orphanChildEnv = "DEVCLUSTER_ORPHAN_CHILD"

// TestNoOrphansWhenKilled kills a process holding a running cluster with
// SIGKILL and checks that the watchdog ends etcd and kube-apiserver and
// removes the cluster directory.
func TestNoOrphansWhenKilled(t *testing.T) {
	if os.Getenv(orphanChildEnv) == "1" {
		c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Minimal})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("DIR", c.Dir)
		time.Sleep(time.Hour)
		return
	}
	if testing.Short() {
		t.Skip("starts a control plane of its own")
	}

	cmd, dir := startKillableChild(t, "TestNoOrphansWhenKilled", orphanChildEnv, "DIR ")
	if n := len(processesMentioning(dir)); n < 2 {
		t.Fatalf("%d processes mention %s; want etcd and kube-apiserver running", n, dir)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(20 * time.Second)
	for {
		procs := processesMentioning(dir)
		_, statErr := os.Stat(dir)
		if len(procs) == 0 && os.IsNotExist(statErr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the kill: processes %v still run, directory stat: %v", procs, statErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startKillableChild runs the test named test again in a child process with
// env=1 set, and returns it and the folder it prints on the stdout line
// starting with prefix (the child prints a line starting with ERROR when it
// cannot start). The child is killed when the test ends, if it still runs.
func startKillableChild(t *testing.T, test, env, prefix string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	// The child is killed, so its own cleanups never run: what it makes
	// under TMPDIR (t.TempDir, envtest's serving certificates) goes in a
	// folder of this test's, removed by this test's cleanup.
	cmd.Env = append(os.Environ(), env+"=1", "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // it may be gone already: the test kills it
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return cmd, d
		}
		if strings.HasPrefix(sc.Text(), "ERROR") {
			t.Fatalf("child: %s", sc.Text())
		}
	}
	t.Fatalf("the child printed no %q line", prefix)
	return nil, ""
}

// processesMentioning returns the command lines of the live processes whose
// command line mentions s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
			continue // a zombie has already ended
		}
		found = append(found, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}
