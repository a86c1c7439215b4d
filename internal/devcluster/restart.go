package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// RestartOptions says how RestartAPIServer takes the API server down.
type RestartOptions struct {
	// Etcd restarts etcd too: the API server stops first and starts last.
	Etcd bool
	// Kill ends the processes with SIGKILL, as a crash would. Otherwise they
	// get SIGTERM, and SIGKILL after Grace.
	Kill bool
	// Grace is how long a SIGTERM'd process may take to exit; zero means
	// 10 s. kube-apiserver's graceful shutdown waits for its long-running
	// requests and can take a minute.
	Grace time.Duration
	// Down is how long everything stays stopped before it starts again.
	Down time.Duration
}

// restartMu serialises restarts: envtest's process state is not safe for
// concurrent use.
var restartMu sync.Mutex

// RestartAPIServer stops kube-apiserver (and etcd, with opts.Etcd), waits
// opts.Down, and starts them again on the same ports with the same data
// directory, certificates and ServiceAccount signing key, so Config,
// KubeconfigPath and every token issued before stay valid. It returns once
// the API server answers its health check again. The controller manager,
// the scheduler and kwok keep running and reconnect by themselves.
//
// It is meant for fault tests; it must not run concurrently with Stop. If it
// fails to start the processes again the cluster is unusable, but Stop still
// cleans up.
func (c *Cluster) RestartAPIServer(ctx context.Context, opts RestartOptions) error {
	restartMu.Lock()
	defer restartMu.Unlock()
	if c.env == nil {
		return errors.New("devcluster: RestartAPIServer: the cluster has no API server")
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	plane := &c.env.ControlPlane
	names := []string{apiServerBin}
	if opts.Etcd {
		names = append(names, etcdBin)
	}
	for _, name := range names {
		if err := c.endChild(name, opts.Kill, opts.Grace); err != nil {
			return err
		}
	}
	// envtest's Stop now only notes that the process is gone; if its
	// goroutine has not marked it exited yet, Stop signals a process that
	// is no more, which is what we want anyway.
	if err := plane.APIServer.Stop(); err != nil && !gone(err) {
		return fmt.Errorf("devcluster: stopping kube-apiserver: %w", err)
	}
	if opts.Etcd {
		if err := plane.Etcd.Stop(); err != nil && !gone(err) {
			return fmt.Errorf("devcluster: stopping etcd: %w", err)
		}
	}
	select {
	case <-ctx.Done():
		// Start anyway: a cluster left half down helps nobody.
	case <-time.After(opts.Down):
	}
	start := func() error {
		if opts.Etcd {
			if err := plane.Etcd.Start(); err != nil {
				return fmt.Errorf("devcluster: starting etcd again (logs in %s): %w", filepath.Join(c.Dir, "logs"), err)
			}
		}
		if err := plane.APIServer.Start(); err != nil {
			return fmt.Errorf("devcluster: starting kube-apiserver again (logs in %s): %w", filepath.Join(c.Dir, "logs"), err)
		}
		return nil
	}
	return c.startWatched(start)
}

// gone reports whether err says the process to stop no longer exists.
func gone(err error) bool {
	return errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH)
}

// startWatched runs start, which starts processes through envtest, handing
// every new child of this cluster to the watchdog as soon as it appears (as
// Start does), so dying meanwhile leaves nothing behind.
func (c *Cluster) startWatched(start func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- start() }()
	watched := map[int]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var err error
	for done := false; !done; {
		select {
		case err = <-errc:
			done = true
		case <-tick.C:
		}
		if werr := c.watchChildren(watched); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// endChild ends this cluster's child process running the binary name (its
// process group, which envtest starts with Setpgid): with SIGKILL when kill
// is set, else with SIGTERM and SIGKILL after grace. It returns once the
// process is gone.
func (c *Cluster) endChild(name string, kill bool, grace time.Duration) error {
	pids, err := childrenIn(c.Dir)
	if err != nil {
		return fmt.Errorf("devcluster: listing the processes: %w", err)
	}
	pid := 0
	for _, p := range pids {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
		if err != nil {
			continue
		}
		if argv0, _, _ := bytes.Cut(cmdline, []byte{0}); filepath.Base(string(argv0)) == name {
			pid = p
			break
		}
	}
	if pid == 0 {
		return fmt.Errorf("devcluster: no %s process of this cluster to stop", name)
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
	// envtest's goroutine reaps it; wait until it has, so envtest sees it
	// exited rather than signalling a recycled id.
	deadline := time.Now().Add(grace)
	for processExists(pid) {
		if time.Now().After(deadline) {
			if sig == syscall.SIGKILL {
				return fmt.Errorf("devcluster: %s (pid %d) outlived SIGKILL", name, pid)
			}
			sig = syscall.SIGKILL
			_ = syscall.Kill(-pid, sig)
			deadline = time.Now().Add(10 * time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// processExists reports whether pid is still a process, zombies included
// (a zombie's stat names state Z until its parent reaps it).
func processExists(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
	return err == nil && len(stat) > 0
}
