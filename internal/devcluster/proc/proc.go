// Package proc runs the binaries of a local cluster (the control plane's and
// the real node's): each in a process group of its own, its output appended
// to a log file, stopped as a group. [Require] checks they were built first.
package proc

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is one component a cluster or its node started itself (envtest
// runs etcd and the API server). It runs in its own process group so that
// stopping it also ends anything it spawned.
type Process struct {
	// Name names the component and its log file.
	Name string
	// Cmd is the running command: its Path, Args and Env start it again.
	Cmd  *exec.Cmd
	log  string        // path of the file holding its output
	done chan struct{} // closed when it has exited
	err  error         // its exit status, valid once done is closed
}

// Start starts path with args and env (as os/exec takes it; nil means this
// process's environment), its output going to logDir/<name>.log and, if out
// is not nil, to out as well.
func Start(name, path string, args, env []string, logDir string, out io.Writer) (*Process, error) {
	logPath := logFile(logDir, name)
	// Appended to: a process started again (KillNodeComponent) continues
	// its log.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devcluster: %s: %w", name, err)
	}
	var w io.Writer = f
	if out != nil {
		w = io.MultiWriter(f, out)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close() // the start error is the one to report
		return nil, fmt.Errorf("devcluster: starting %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		// Nothing is left to tell of a failed Close: p.err holds the exit
		// status, and exited reads the log by its path.
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports an error naming the process and the end of its log if it
// has exited, and nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("devcluster: %s exited (%v); end of its log:\n%s", p.Name, p.err, tail(p.log, 20))
	default:
		return nil
	}
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Stop ends the process group with SIGTERM, then SIGKILL after grace, and
// waits for the process to exit.
func (p *Process) Stop(grace time.Duration) {
	pgid := p.Cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that ignored SIGTERM but outlived their leader.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail returns the last n lines of the file at path, or a note why it cannot.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// logFile is the file logDir holds a component's output in.
func logFile(logDir, name string) string { return filepath.Join(logDir, name+".log") }
