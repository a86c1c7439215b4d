package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxAttempts bounds what Attempts keeps.
const maxAttempts = 1000

// Sandbox is one running process in namespaces of its own; see Start.
type Sandbox struct {
	cmd     *exec.Cmd
	cg      *cgroup
	tun     *os.File
	servers []io.Closer // the DNS listeners on loopback
	// early are Spec.Listen's listeners, opened before the process, until
	// Listen hands them out.
	early   map[string]net.Listener
	release chan struct{}
	done    chan struct{} // closed when the process was reaped
	state   *os.ProcessState
	readers sync.WaitGroup

	nsMu sync.RWMutex
	nsFD int // the network namespace, -1 once closed

	mu        sync.Mutex
	attempts  []Attempt
	seen      map[string]bool
	conns     map[net.Conn]bool // DNS clients on loopback; nil once closing
	lastUsage *Usage

	closeOnce sync.Once
	closeErr  error
}

// Start runs spec.Args as PID 1 of new PID, mount, UTS, IPC and network
// namespaces, chrooted (or pivot_root) into RootFS with /tmp as a tmpfs and
// /proc mounted, as UID:GID with no capabilities and no_new_privs, in a cgroup v2
// of its own with spec.Limits. The network namespace has only loopback and a
// trap: every packet to any other address (IPv4 and IPv6, TCP, UDP, ICMP) is
// recorded as an Attempt and never answered, and loopback port 53 (UDP and TCP,
// 127.0.0.1, 127.0.0.53, ::1) records DNS queries.
//
// The root file system is mounted read-only (the operator sets
// readOnlyRootFilesystem); /tmp is a tmpfs of Limits.TmpBytes, /dev a tmpfs
// with null, zero, full, random, urandom and tty. On a cgroup v1 machine the
// cgroup is one per v1 hierarchy (see newCgroup). Start returns once the
// plugin's program was executed, or with the reason it could not be.
func Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("sandbox: %w (namespaces, mounts and cgroups)", ErrNeedsRoot)
	}
	if !filepath.IsAbs(spec.RootFS) {
		return nil, fmt.Errorf("sandbox: RootFS %q is not an absolute path", printable(spec.RootFS, 200))
	}
	if len(spec.Args) == 0 || spec.Args[0] == "" {
		return nil, errors.New("sandbox: Args is empty: the image names no entrypoint or command")
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname = "plugin"
	}
	lim := spec.Limits.withDefaults()
	if err := writeEtc(spec.RootFS, spec.ResolvConf); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cg, err := newCgroup(lim)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s := &Sandbox{cg: cg, nsFD: -1, early: map[string]net.Listener{}, release: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}, conns: map[net.Conn]bool{}}
	cfg, err := json.Marshal(initConfig{
		RootFS: spec.RootFS, Args: spec.Args, Env: spec.Env, Dir: spec.Dir,
		UID: spec.UID, GID: spec.GID, Hostname: hostname, TmpBytes: lim.TmpBytes,
	})
	if err != nil {
		_ = cg.remove()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		_ = cg.remove()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _ = cfgR.Close(), cfgW.Close()
		_ = cg.remove()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer func() { _, _ = cfgW.Close(), errR.Close() }()
	s.cmd = &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{initArg0},
		Env:        []string{},
		Stdout:     orDiscard(spec.Stdout),
		Stderr:     orDiscard(spec.Stderr),
		ExtraFiles: []*os.File{cfgR, errW},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
			// Tied to the thread that forks, which lives until Close: the
			// process dies with the harness.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	started := make(chan error, 1)
	go onOwnThread(func() { s.netnsThread(started, spec.Listen) })
	err = <-started
	_, _ = cfgR.Close(), errW.Close()
	if err != nil {
		s.abort()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	go func() {
		// The error is the exit status, read from the ProcessState.
		_ = s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.done)
	}()
	// The init waits for its config, so it is in the cgroup before it
	// runs anything of the image.
	if err := cg.add(s.cmd.Process.Pid); err != nil {
		s.abort()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if _, err := cfgW.Write(cfg); err != nil {
		s.abort()
		return nil, fmt.Errorf("sandbox: sending the config: %w", err)
	}
	_ = cfgW.Close()
	msg := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(errR, 4096))
		msg <- b
	}()
	select {
	case b := <-msg:
		if len(b) > 0 {
			s.abort()
			return nil, fmt.Errorf("sandbox: starting %q: %s", printable(spec.Args[0], 200), printable(string(b), 2000))
		}
	case <-ctx.Done():
		s.abort()
		return nil, fmt.Errorf("sandbox: starting: %w", ctx.Err())
	}
	return s, nil
}

// netnsThread makes the network namespace on a thread of its own, sets up
// the trap and the DNS listeners there, forks the process from it (so the
// process is born in the namespace, with the trap already in place) and
// keeps the thread until Close. It runs under onOwnThread: the thread ends
// with it instead of going back to the runtime in another namespace.
func (s *Sandbox) netnsThread(started chan<- error, early []string) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		started <- fmt.Errorf("new network namespace: %w", err)
		return
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		started <- fmt.Errorf("network namespace: %w", err)
		return
	}
	s.nsFD = fd
	tun, ipv6, err := setUpNetns()
	if err != nil {
		started <- err
		return
	}
	s.tun = tun
	if err := s.listenDNS(ipv6); err != nil {
		started <- err
		return
	}
	for _, a := range early {
		l, err := net.Listen("tcp", a)
		if err != nil {
			started <- fmt.Errorf("listening on %s before the start: %w", a, err)
			return
		}
		s.mu.Lock()
		s.early[a] = l
		s.mu.Unlock()
	}
	if err := s.cmd.Start(); err != nil {
		started <- fmt.Errorf("starting the init: %w", err)
		return
	}
	s.readers.Add(1)
	go s.readTrap()
	started <- nil
	<-s.release
}

// abort ends a Start that failed half-way.
func (s *Sandbox) abort() { _ = s.Close() }

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// writeEtc writes /etc/resolv.conf and /etc/hosts into the root file
// system, as a kubelet mounts them, replacing the image's.
func writeEtc(root, resolvConf string) error {
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if err := writeRootFile(root, "etc/resolv.conf", []byte(resolvConf)); err != nil {
		return err
	}
	return writeRootFile(root, "etc/hosts", []byte(hosts))
}

// writeRootFile replaces one file of the root file system, resolving its
// parent inside root and following no link at its name.
func writeRootFile(root, name string, data []byte) error {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("RootFS: %w", err)
	}
	defer func() { _ = unix.Close(rootFD) }() // an O_PATH descriptor
	w := &treeWriter{rootFD: rootFD, implicit: map[string]bool{}}
	parent, base, err := w.parent(name)
	if err != nil {
		return fmt.Errorf("RootFS /%s: %w", name, err)
	}
	defer func() { _ = unix.Close(parent) }() // an O_PATH descriptor
	if err := unix.Unlinkat(parent, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("RootFS /%s: %w", name, err)
	}
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("RootFS /%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(0o644), f.Close())
	if err != nil {
		return fmt.Errorf("RootFS /%s: %w", name, err)
	}
	return nil
}

// inNetns runs f on a new thread that joined the sandbox's network
// namespace; the thread ends with f, never returning to the runtime.
func (s *Sandbox) inNetns(f func()) error {
	errc := make(chan error, 1)
	go onOwnThread(func() {
		s.nsMu.RLock()
		if s.nsFD < 0 {
			s.nsMu.RUnlock()
			errc <- ErrClosed
			return
		}
		err := unix.Setns(s.nsFD, unix.CLONE_NEWNET)
		s.nsMu.RUnlock()
		if err != nil {
			errc <- fmt.Errorf("joining the network namespace: %w", err)
			return
		}
		f()
		errc <- nil
	})
	return <-errc
}

// Listen opens a listener inside the sandbox's network namespace (the harness
// puts the egress proxy and the core's stand-in there, on loopback).
func (s *Sandbox) Listen(network, address string) (net.Listener, error) {
	if network == "tcp" {
		s.mu.Lock()
		l, ok := s.early[address]
		delete(s.early, address)
		s.mu.Unlock()
		if ok {
			return l, nil
		}
	}
	var (
		l   net.Listener
		err error
	)
	if nsErr := s.inNetns(func() { l, err = net.Listen(network, address) }); nsErr != nil {
		return nil, fmt.Errorf("sandbox: %w", nsErr)
	}
	return l, err
}

// DialContext connects from inside the sandbox's network namespace (the harness
// calls the plugin's port on loopback).
func (s *Sandbox) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var (
		c   net.Conn
		err error
	)
	if nsErr := s.inNetns(func() { c, err = (&net.Dialer{}).DialContext(ctx, network, address) }); nsErr != nil {
		return nil, fmt.Errorf("sandbox: %w", nsErr)
	}
	return c, err
}

// record keeps one attempt unless its flow was seen or the list is full.
func (s *Sandbox) record(a Attempt, flow string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.attempts) >= maxAttempts || s.seen[flow] {
		return
	}
	s.seen[flow] = true
	s.attempts = append(s.attempts, a)
}

// Attempts lists what the plugin tried outside loopback, in order, at most
// 1000: one per TCP connection, UDP flow, ICMP echo or DNS query
// (retransmissions count once).
func (s *Sandbox) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// Signal sends sig to the sandbox's PID 1. As in a container, a signal
// other than SIGKILL and SIGSTOP reaches it only if it installed a handler.
func (s *Sandbox) Signal(sig os.Signal) error {
	select {
	case <-s.done:
		return os.ErrProcessDone
	default:
	}
	return s.cmd.Process.Signal(sig)
}

// Wait waits for the process to exit or ctx to end. A process a signal
// ended has Code 128 plus the signal's number, as a kubelet reports it.
func (s *Sandbox) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
	ws, ok := s.state.Sys().(syscall.WaitStatus)
	if !ok {
		return ExitStatus{Code: s.state.ExitCode(), Exited: s.state.Exited()}, nil
	}
	if ws.Signaled() {
		return ExitStatus{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}, nil
	}
	return ExitStatus{Code: ws.ExitStatus(), Exited: true}, nil
}

// Usage reads the sandbox's cgroup: the peak memory, CPU time and whether
// the OOM killer ended a process. After Close it returns what Close read
// last.
func (s *Sandbox) Usage() (Usage, error) {
	s.mu.Lock()
	last := s.lastUsage
	s.mu.Unlock()
	if last != nil {
		return *last, nil
	}
	u, err := s.cg.usage()
	if err != nil {
		return u, fmt.Errorf("sandbox: %w", err)
	}
	return u, nil
}

// Close kills what still runs and removes the namespace, mounts, cgroup and
// files it made; safe to call twice.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Sandbox) close() error {
	var errs []error
	if s.cmd != nil && s.cmd.Process != nil {
		// SIGKILL to PID 1 ends every process of its PID namespace; the
		// cgroup's are killed too for good measure.
		_ = s.cmd.Process.Kill()
		s.cg.kill()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("sandbox: the process did not end 10 s after SIGKILL"))
		}
	}
	if u, err := s.cg.usage(); err == nil {
		s.mu.Lock()
		s.lastUsage = &u
		s.mu.Unlock()
	}
	close(s.release)
	if s.tun != nil {
		errs = append(errs, s.tun.Close())
	}
	for _, c := range s.servers {
		_ = c.Close()
	}
	s.mu.Lock()
	for a, l := range s.early {
		_ = l.Close()
		delete(s.early, a)
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.readers.Wait()
	s.nsMu.Lock()
	if s.nsFD >= 0 {
		errs = append(errs, unix.Close(s.nsFD))
		s.nsFD = -1
	}
	s.nsMu.Unlock()
	if err := s.cg.remove(); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: %w", err))
	}
	return errors.Join(errs...)
}
