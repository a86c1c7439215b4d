package proc

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Restart policy of a Supervised process: it is started again after a pause
// of RestartDelay, unless it has already been started again RestartBurst
// times within RestartWindow, which is a crash loop and not a one-off crash.
const (
	RestartBurst  = 3
	RestartWindow = time.Minute
	RestartDelay  = 500 * time.Millisecond
)

// Supervised runs a component that keeps no state of its own and starts it
// again when it exits by itself, as systemd's Restart=on-failure would, so a
// one-off crash costs a restart and not the cluster. kwok is one: it has
// been seen to die of a data race in a library it uses while its
// controllers start, and a new kwok reads everything again from the API
// server. Each restart is noted in the component's log. After RestartBurst
// restarts within RestartWindow it gives up, and Exited reports it.
type Supervised struct {
	name   string
	start  func() (*Process, error)
	hooks  Hooks
	logDir string

	mu       sync.Mutex
	cur      *Process    // the running process, or the last one
	restarts []time.Time // when it was started again, oldest first
	gaveUp   error       // set once it will not be started again
	stopping bool

	quit chan struct{} // closed by Stop
	done chan struct{} // closed when the supervising goroutine has returned
}

// Hooks are what a Supervised process's owner does around its starts.
type Hooks struct {
	// Watch, if not nil, is handed the process group of every process
	// started (the first included), as the cluster's watchdog needs. A
	// process it refuses is stopped at once.
	Watch func(pid int) error
	// BeforeRestart, if not nil, runs before each restart (not before the
	// first start): to clear what the dead process held, such as kwok's
	// node leases, which a new kwok would otherwise wait out. Its error is
	// noted in the log and does not prevent the restart.
	BeforeRestart func() error
}

// Supervise starts path as Start does and keeps it running.
func Supervise(name, path string, args, env []string, logDir string, out io.Writer, hooks Hooks) (*Supervised, error) {
	s := &Supervised{
		name:   name,
		start:  func() (*Process, error) { return Start(name, path, args, env, logDir, out) },
		hooks:  hooks,
		logDir: logDir,
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	p, err := s.startWatched()
	if err != nil {
		return nil, err
	}
	s.cur = p
	go s.supervise()
	return s, nil
}

// startWatched starts the process and hands it to the watchdog, stopping it
// again if the watchdog cannot take it: nothing runs unwatched.
func (s *Supervised) startWatched() (*Process, error) {
	p, err := s.start()
	if err != nil {
		return nil, err
	}
	if s.hooks.Watch != nil {
		if err := s.hooks.Watch(p.Pid()); err != nil {
			p.Stop(time.Second)
			return nil, fmt.Errorf("devcluster: watchdog: %w", err)
		}
	}
	return p, nil
}

// supervise waits for each process to exit and starts the next one, until
// Stop or the restart limit.
func (s *Supervised) supervise() {
	defer close(s.done)
	for {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		select {
		case <-s.quit:
			return
		case <-cur.Done():
		}
		exit := cur.Exited()
		now := time.Now()
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		for len(s.restarts) > 0 && now.Sub(s.restarts[0]) > RestartWindow {
			s.restarts = s.restarts[1:]
		}
		if len(s.restarts) >= RestartBurst {
			s.gaveUp = fmt.Errorf("%w; started again %d times within %s, so not again", exit, len(s.restarts), RestartWindow)
			s.mu.Unlock()
			return
		}
		s.restarts = append(s.restarts, now)
		n := len(s.restarts)
		s.mu.Unlock()

		s.note(fmt.Sprintf("devcluster: %s exited (%v); starting it again in %s (restart %d of at most %d within %s)",
			s.name, cur.err, RestartDelay, n, RestartBurst, RestartWindow))
		select {
		case <-s.quit:
			return
		case <-time.After(RestartDelay):
		}
		if s.hooks.BeforeRestart != nil {
			if err := s.hooks.BeforeRestart(); err != nil {
				s.note(fmt.Sprintf("devcluster: before starting %s again: %v", s.name, err))
			}
		}

		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		// Started under the lock, so Stop sees either the old process,
		// already gone, and no new one, or the new one.
		p, err := s.startWatched()
		if err != nil {
			s.gaveUp = fmt.Errorf("devcluster: starting %s again: %w", s.name, err)
			s.mu.Unlock()
			return
		}
		s.cur = p
		s.mu.Unlock()
	}
}

// note appends line to the component's log, where its output goes.
func (s *Supervised) note(line string) {
	f, err := os.OpenFile(logFile(s.logDir, s.name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return // the log is a courtesy; the restart matters more
	}
	_, _ = fmt.Fprintln(f, line)
	_ = f.Close()
}

// Exited reports an error naming the component, why it was not started
// again and the end of its log once it has given up, and nil while it runs
// or is about to be started again.
func (s *Supervised) Exited() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gaveUp
}

// Restarts returns how many times the component has been started again
// within the last RestartWindow.
func (s *Supervised) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.restarts {
		if time.Since(at) <= RestartWindow {
			n++
		}
	}
	return n
}

// Pid is the running process's id (its process group's), or the last one's.
func (s *Supervised) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Pid()
}

// Stop ends supervision and the running process as Process.Stop does. No
// process is started after Stop begins.
func (s *Supervised) Stop(grace time.Duration) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.stopping = true
	cur := s.cur
	s.mu.Unlock()
	close(s.quit)
	cur.Stop(grace)
	<-s.done
}
