package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	openfief "github.com/arkadiuss/openfief/sdk/go"
)

// procSpec is what one local plugin's process is started from, every
// time: its binary, its environment (without the listener's variables,
// which supervise adds) and the file its output is appended to.
type procSpec struct {
	bin, logFile string
	env          []string
}

// restartPolicy is how long supervise waits before it starts a process
// that exited again: first, doubling after each exit up to max, and first
// again once a process ran for stable.
type restartPolicy struct {
	first, max, stable time.Duration
}

// defaultRestart is the local runner's restart policy.
var defaultRestart = restartPolicy{first: 250 * time.Millisecond, max: 30 * time.Second, stable: time.Minute}

// after returns the wait before the next start, given the last wait and
// how long the process that exited ran.
func (p restartPolicy) after(last, ran time.Duration) time.Duration {
	if last == 0 || ran >= p.stable {
		return p.first
	}
	return min(2*last, p.max)
}

// listenFD is the descriptor the process finds its listener at: the first
// after standard input, output and error (exec.Cmd.ExtraFiles[0]).
const listenFD = 3

// supervisor runs one local plugin's process on a listener it does not
// own, and starts it again whenever it exits, until stopped: the runner
// holds the listener, so the port is never free while the route to it
// exists, whether the process is running, starting or dead.
type supervisor struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	pid    int
	starts int
}

// supervise starts spec's process with a copy of ln as descriptor 3
// (OPENFIEF_LISTEN_FD, and ln's port as OPENFIEF_LISTEN_PORT), and keeps
// it running under policy until stop. ln stays open: the caller closes it,
// after stop.
func supervise(ctx context.Context, log *slog.Logger, name string, spec procSpec, ln *net.TCPListener, policy restartPolicy) *supervisor {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &supervisor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var wait time.Duration
		for {
			began := time.Now()
			err := s.runOnce(ctx, spec, ln)
			if ctx.Err() != nil {
				return
			}
			wait = policy.after(wait, time.Since(began))
			log.Warn("local plugin process ended; starting it again on the same listener", "plugin", name, "after", wait.String(), "error", errorText(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return s
}

// errorText is err's text, or "exited 0".
func errorText(err error) string {
	if err == nil {
		return "exited 0"
	}
	return err.Error()
}

// runOnce runs one process until it exits or ctx is done (it is then
// killed), and returns why it ended.
func (s *supervisor) runOnce(ctx context.Context, spec procSpec, ln *net.TCPListener) error {
	// The child's copy of the listener; the runner's own stays open.
	f, err := ln.File()
	if err != nil {
		return fmt.Errorf("copy the listener: %w", err)
	}
	defer func() { _ = f.Close() }()
	logf, err := os.OpenFile(spec.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.CommandContext(ctx, spec.bin)
	cmd.Env = append(append([]string{}, spec.env...),
		openfief.EnvListenFD+"="+strconv.Itoa(listenFD),
		openfief.EnvListenPort+"="+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = f.Close() // the child has its own
	s.mu.Lock()
	s.pid, s.starts = cmd.Process.Pid, s.starts+1
	s.mu.Unlock()
	err = cmd.Wait()
	s.mu.Lock()
	s.pid = 0
	s.mu.Unlock()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("process %d: %s", cmd.Process.Pid, exit.ProcessState)
	}
	return err
}

// current returns the running process's ID (0 while none runs) and how
// many processes were started.
func (s *supervisor) current() (pid, starts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid, s.starts
}

// stop kills the process and waits until it is gone; nothing is started
// after.
func (s *supervisor) stop() {
	s.cancel()
	<-s.done
}
