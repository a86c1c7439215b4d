package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartProcess runs a binary (a control-plane component, usually) until the
// test ends, in its own process group, killed with the test process if that
// dies first: SIGTERM at the end, SIGKILL 10 s later. Its output goes to a
// log whose last 40 lines are shown when the test failed.
func StartProcess(t testing.TB, path string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(path)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if err := logFile.Close(); err != nil {
			t.Errorf("close %s: %v", logPath, err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s log (last 40 lines):\n%s", filepath.Base(path), strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
}
