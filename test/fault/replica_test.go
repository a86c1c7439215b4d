//go:build cluster

package fault

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// leaderTiming is what the replicas' leader election is told
// (--leader-election-lease-duration, -renew-deadline, -retry-period).
type leaderTiming struct {
	lease, renew, retry time.Duration
}

// fastElection is the timing the suite's replicas use unless a test says
// otherwise: a dead leader is replaced within about 3.5 s, instead of
// controller-runtime's 15 s.
var fastElection = leaderTiming{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}

// killPoint is one planned SIGKILL of a replica: at its afterWrites-th write
// (mode says whether before or after the API server got it) or, when
// afterWrites is zero, after it has run for after. restartIn is how long it
// stays dead.
type killPoint struct {
	afterWrites int
	mode        killMode
	after       time.Duration
	restartIn   time.Duration
	// objectsOnly counts only writes of plugin objects and status towards
	// afterWrites, not Lease renewals and Events.
	objectsOnly bool
}

func (k killPoint) String() string {
	if k.afterWrites > 0 {
		return fmt.Sprintf("at write %d, %s; restart after %s", k.afterWrites, k.mode, k.restartIn)
	}
	return fmt.Sprintf("%s after start; restart after %s", k.after, k.restartIn)
}

// replica is one operator process, started from the binary the suite built,
// restarted after every exit (as a Deployment's pod would be) until stopped.
// It consumes one killPoint of its plan per incarnation.
type replica struct {
	p       *platform
	name    string
	tap     *tap // nil when the replica talks to the API server directly
	args    []string
	logPath string
	// ops reports the load driver's operations so far, for the kill log.
	ops func() int64

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{} // closed when the current incarnation exited
	incarnation int
	started     time.Time
	writes      int // writes of the current incarnation
	objWrites   int // of those, writes of plugin objects and status
	plan        []killPoint
	armed       *killPoint
	killing     bool // the current incarnation is being killed on purpose
	kills       []killRecord
	crashes     int
	stopped     bool
	stopc       chan struct{}
	wg          sync.WaitGroup
}

// killRecord is one kill that happened.
type killRecord struct {
	at          time.Time // when SIGKILL was sent
	sent        bool      // it was: at is final
	incarnation int
	point       killPoint
	write       string // the write it happened at, if write-triggered
}

// newReplica prepares a replica named name with the given election timing
// and kill plan, talking through a tap unless direct. start runs it; the
// test's cleanup stops it.
func newReplica(p *platform, name string, direct bool, timing leaderTiming, plan []killPoint) *replica {
	p.t.Helper()
	r := &replica{p: p, name: name, plan: plan, stopc: make(chan struct{}), ops: func() int64 { return 0 }}
	server := ""
	if !direct {
		r.tap = startTap(p.t, name, p.adminConfig())
		r.tap.setHook(r.onWrite)
		server = r.tap.addr
	}
	kubeconfig := p.writeKubeconfig(name, server)
	r.logPath = filepath.Join(p.dir, name+".log")
	r.args = []string{
		"--kubeconfig=" + kubeconfig,
		"--trusted-signers=" + suite.signersFile,
		// kwok runs no container: a pinned name that is never pulled.
		"--isolation-gate-image=" + testutil.GateImage,
		"--leader-elect=true",
		"--leader-election-lease-duration=" + timing.lease.String(),
		"--leader-election-renew-deadline=" + timing.renew.String(),
		"--leader-election-retry-period=" + timing.retry.String(),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=",
		"--registry-timeout=10s",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	}
	p.t.Cleanup(r.stop)
	return r
}

// start starts the next incarnation and arms its kill point.
func (r *replica) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.incarnation++
	r.writes, r.objWrites = 0, 0
	r.armed, r.killing = nil, false
	if len(r.plan) > 0 {
		kp := r.plan[0]
		r.plan = r.plan[1:]
		r.armed = &kp
	}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.p.t.Errorf("%s: %v", r.name, err)
		return
	}
	fmt.Fprintf(logf, "=== incarnation %d at %s\n", r.incarnation, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(suite.operatorBin, r.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := startProcess(cmd); err != nil {
		_ = logf.Close()
		r.p.t.Errorf("starting %s: %v", r.name, err)
		return
	}
	r.cmd, r.started, r.done = cmd, time.Now(), make(chan struct{})
	inc, done := r.incarnation, r.done
	r.p.logf("%s: started incarnation %d (pid %d)", r.name, inc, cmd.Process.Pid)
	if kp := r.armed; kp != nil && kp.afterWrites == 0 {
		time.AfterFunc(kp.after, func() {
			r.mu.Lock()
			fire := r.incarnation == inc && r.armed == kp && !r.stopped
			if fire {
				r.armed, r.killing = nil, true
				r.kills = append(r.kills, killRecord{at: time.Now(), incarnation: inc, point: *kp})
			}
			writes := r.writes
			r.mu.Unlock()
			if fire {
				r.kill(inc, fmt.Sprintf("%s after start (%d writes)", kp.after, writes))
			}
		})
	}
	r.wg.Add(1)
	go r.wait(cmd, inc, done, logf)
}

// onWrite is the tap's hook: it counts the incarnation's writes and fires a
// write-triggered kill point.
func (r *replica) onWrite(w write) (killMode, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if len(w.plugins) > 0 {
		r.objWrites++
	}
	kp := r.armed
	n := r.writes
	if kp != nil && kp.objectsOnly {
		n = r.objWrites
	}
	if kp == nil || kp.afterWrites != n || r.stopped || (kp.objectsOnly && len(w.plugins) == 0) {
		return noKill, nil
	}
	r.armed, r.killing = nil, true
	r.kills = append(r.kills, killRecord{at: time.Now(), incarnation: r.incarnation, point: *kp, write: w.String()})
	inc, what := r.incarnation, "write"
	if kp.objectsOnly {
		what = "write of a plugin object"
	}
	return kp.mode, func() { r.kill(inc, fmt.Sprintf("at its %s %d since start (%s), %s", what, n, w, kp.mode)) }
}

// kill SIGKILLs incarnation inc (its whole process group) and waits until it
// is gone.
func (r *replica) kill(inc int, why string) {
	r.mu.Lock()
	if r.incarnation != inc || r.cmd == nil {
		r.mu.Unlock()
		return
	}
	pid, done, started := r.cmd.Process.Pid, r.done, r.started
	r.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	// The kill happens now, which for a kill after the API server answered
	// is later than when the write arrived.
	r.mu.Lock()
	if n := len(r.kills); n > 0 && r.kills[n-1].incarnation == inc {
		r.kills[n-1].at, r.kills[n-1].sent = time.Now(), true
	}
	r.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.p.t.Errorf("%s (pid %d) outlived SIGKILL", r.name, pid)
	}
	r.p.logf("KILL %s: SIGKILL pid %d (incarnation %d) %s; it had run %s; load driver at %d operations",
		r.name, pid, inc, why, time.Since(started).Round(time.Millisecond), r.ops())
}

// arm arms kp for the running incarnation; a write-triggered kp counts from
// now (its afterWrites-th write from here).
func (r *replica) arm(kp killPoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case kp.afterWrites > 0 && kp.objectsOnly:
		kp.afterWrites += r.objWrites
	case kp.afterWrites > 0:
		kp.afterWrites += r.writes
	}
	r.armed = &kp
}

// wait reaps an incarnation and starts the next one: after the kill point's
// restart delay when the suite killed it, after 500 ms when it exited by
// itself (a lost leadership, say; a panic fails the test).
func (r *replica) wait(cmd *exec.Cmd, inc int, done chan struct{}, logf *os.File) {
	defer r.wg.Done()
	err := cmd.Wait()
	_ = logf.Close()
	close(done)

	r.mu.Lock()
	deliberate := r.killing
	r.killing = false
	delay := 500 * time.Millisecond
	if deliberate {
		if n := len(r.kills); n > 0 && r.kills[n-1].incarnation == inc {
			delay = r.kills[n-1].point.restartIn
		}
	} else if !r.stopped {
		r.crashes++
	}
	r.cmd = nil
	stopped := r.stopped
	uptime := time.Since(r.started).Round(time.Millisecond)
	r.mu.Unlock()
	if stopped {
		return
	}
	if !deliberate {
		tail := logTail(r.logPath, 40)
		if strings.Contains(tail, "panic:") || strings.Contains(tail, "fatal error:") {
			r.p.t.Errorf("%s crashed (incarnation %d); end of its log:\n%s", r.name, inc, tail)
		}
		last := strings.Split(tail, "\n")
		r.p.logf("%s: incarnation %d exited by itself after %s (%v), saying %q; restarting in %s", r.name, inc, uptime, err, last[len(last)-1], delay)
	}
	select {
	case <-r.stopc:
		return
	case <-time.After(delay):
	}
	r.start()
}

// stop kills the replica for good and waits for its supervisor.
func (r *replica) stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		r.wg.Wait()
		return
	}
	r.stopped = true
	close(r.stopc)
	var pid int
	if r.cmd != nil {
		pid = r.cmd.Process.Pid
	}
	r.mu.Unlock()
	if pid != 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	r.wg.Wait()
}

// running reports whether an incarnation is running, and its pid.
func (r *replica) running() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0, false
	}
	return r.cmd.Process.Pid, true
}

// killLog returns the kills so far.
func (r *replica) killLog() []killRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]killRecord(nil), r.kills...)
}

// planLeft is how many kill points were never reached.
func (r *replica) planLeft() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.plan)
	if r.armed != nil {
		n++
	}
	return n
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
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
