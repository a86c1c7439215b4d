package devcluster_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
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
	skipUnlessRealNode(t)

	cmd := exec.Command(os.Args[0], "-test.run=^TestRealNodeCleanedAfterKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), nodeKillChildEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }() // it may be gone already: killed below
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			dir = d
			break
		}
		if strings.HasPrefix(sc.Text(), "ERROR") {
			t.Fatalf("child: %s", sc.Text())
		}
	}
	if dir == "" {
		t.Fatal("the child printed no node state folder")
	}
	assertSeesRunningNode(t, dir)

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: its exit status says so
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("state folder %s gone before the cleanup: %v", dir, err)
	}
	start := time.Now()
	if err := devcluster.CleanNodeLeftovers(5 * time.Minute); err != nil {
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
