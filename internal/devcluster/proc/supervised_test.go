package proc_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// pids records the process groups a Supervised hands its watchdog.
type pids struct {
	mu   sync.Mutex
	seen []int
}

func (p *pids) watch(pid int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, pid)
	return nil
}

func (p *pids) all() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.seen...)
}

// alive reports whether pid is a process that has not exited (a zombie
// counts as exited).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] != 'Z'
}

// waitUntil polls cond every 20 ms for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// TestSupervisedStartsAgain kills a supervised process, as a crash would,
// and checks that a new one runs, the watchdog got its process group, the
// log says why, and Exited stays nil; then that Stop ends it for good.
func TestSupervisedStartsAgain(t *testing.T) {
	logs := t.TempDir()
	var w pids
	var before atomic.Int32
	hooks := proc.Hooks{Watch: w.watch, BeforeRestart: func() error {
		before.Add(1)
		return errors.New("could not clear the lease")
	}}
	s, err := proc.Supervise("sleeper", "/bin/sh", []string{"-c", "echo up; exec sleep 60"}, nil, logs, nil, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(time.Second) })
	first := s.Pid()
	if got := w.all(); len(got) != 1 || got[0] != first {
		t.Fatalf("watchdog got %v, want [%d]", got, first)
	}

	logPath := filepath.Join(logs, "sleeper.log")
	ups := func(n int) func() bool {
		return func() bool {
			log, _ := os.ReadFile(logPath)
			return strings.Count(string(log), "up\n") == n
		}
	}
	if !waitUntil(5*time.Second, ups(1)) {
		t.Fatal("the process did not start within 5 s")
	}
	if err := syscall.Kill(-first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(5*time.Second, func() bool { return s.Pid() != first && alive(s.Pid()) && ups(2)() }) {
		t.Fatalf("no new process within 5 s of killing %d (now %d)", first, s.Pid())
	}
	second := s.Pid()
	if err := s.Exited(); err != nil {
		t.Errorf("Exited after one crash = %v, want nil", err)
	}
	if n := before.Load(); n != 1 {
		t.Errorf("BeforeRestart ran %d times, want once", n)
	}
	if n := s.Restarts(); n != 1 {
		t.Errorf("Restarts = %d, want 1", n)
	}
	if got := w.all(); len(got) != 2 || got[1] != second {
		t.Errorf("watchdog got %v, want [%d %d]", got, first, second)
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"sleeper exited (signal: killed); starting it again",
		"before starting sleeper again: could not clear the lease",
	} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log does not say %q:\n%s", want, log)
		}
	}

	s.Stop(time.Second)
	if alive(second) {
		t.Errorf("process %d still runs after Stop", second)
	}
	time.Sleep(2 * proc.RestartDelay)
	if s.Pid() != second || len(w.all()) != 2 {
		t.Errorf("a process was started after Stop: pid %d, watched %v", s.Pid(), w.all())
	}
	if err := s.Exited(); err != nil {
		t.Errorf("Exited after Stop = %v, want nil (stopping is not a crash)", err)
	}
}

// TestSupervisedGivesUpOnCrashLoop runs a process that fails at once every
// time and checks that the supervisor stops starting it after
// RestartBurst restarts, and that Exited then says why and shows its log.
func TestSupervisedGivesUpOnCrashLoop(t *testing.T) {
	logs := t.TempDir()
	var w pids
	s, err := proc.Supervise("crasher", "/bin/sh", []string{"-c", "echo boom; exit 3"}, nil, logs, nil, proc.Hooks{Watch: w.watch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(time.Second) })
	limit := time.Duration(proc.RestartBurst+2) * (proc.RestartDelay + 500*time.Millisecond)
	if !waitUntil(limit, func() bool { return s.Exited() != nil }) {
		t.Fatalf("still restarting after %s: restarts %d", limit, s.Restarts())
	}
	err = s.Exited()
	for _, want := range []string{"crasher exited (exit status 3)", "boom", "started again 3 times within 1m0s, so not again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Exited = %q; want it to say %q", err, want)
		}
	}
	if got := len(w.all()); got != proc.RestartBurst+1 {
		t.Errorf("started %d times, want %d (the first and %d restarts)", got, proc.RestartBurst+1, proc.RestartBurst)
	}
	time.Sleep(2 * proc.RestartDelay)
	if got := len(w.all()); got != proc.RestartBurst+1 {
		t.Errorf("started again after giving up: %d starts", got)
	}
}

// TestSuperviseWatchdogRefuses checks that a process the watchdog cannot
// take is stopped and not left running.
func TestSuperviseWatchdogRefuses(t *testing.T) {
	var started int
	refuse := func(pid int) error { started = pid; return errors.New("watchdog gone") }
	_, err := proc.Supervise("unwatched", "/bin/sh", []string{"-c", "exec sleep 60"}, nil, t.TempDir(), nil, proc.Hooks{Watch: refuse})
	if err == nil || !strings.Contains(err.Error(), "watchdog gone") {
		t.Fatalf("Supervise = %v, want the watchdog's error", err)
	}
	if started == 0 || alive(started) {
		t.Errorf("process %d left running although the watchdog refused it", started)
	}
}
