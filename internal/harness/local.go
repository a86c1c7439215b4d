package harness

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// LocalProcess is a stand-in Runtime for tests only, never for a verdict on
// a vendor's image: it copies the image's entrypoint (a static binary) out of
// its layers and runs it as a plain process of this machine, with the pod's
// environment, its files under a temporary directory (the variables naming
// them rewritten to point there), its listeners on free loopback ports (the
// variables naming them rewritten) and the plugin's port handed down as an
// inherited listener (OPENFIEF_LISTEN_FD, which only the Go SDK reads). It
// has no namespace, no cgroup and no other user: it cannot see a direct
// connection or a DNS query (Blind), and measures memory as the process's
// high-water mark of its resident set
// (VmHWM), sampled while it runs.
var LocalProcess Starter = startLocal

// maxLocalBinary bounds the entrypoint LocalProcess copies out of an image.
const maxLocalBinary = 512 << 20

func startLocal(ctx context.Context, pod Pod) (Runtime, error) {
	if len(pod.Args) == 0 {
		return nil, errors.New("the image names no entrypoint")
	}
	dir, err := os.MkdirTemp("", "openfief-harness-local-")
	if err != nil {
		return nil, err
	}
	r := &localRuntime{dir: dir, ports: map[string]string{}, done: make(chan struct{})}
	fail := func(err error) (Runtime, error) {
		_ = r.Close()
		return nil, err
	}
	bin := filepath.Join(dir, "entrypoint")
	if err := extractFile(pod, pod.Args[0], bin); err != nil {
		return fail(err)
	}
	fsDir := filepath.Join(dir, "fs")
	for _, d := range pod.Dirs {
		if err := os.MkdirAll(filepath.Join(fsDir, filepath.FromSlash(path.Clean(d))), 0o700); err != nil {
			return fail(err)
		}
	}
	for _, f := range pod.Files {
		p := filepath.Join(fsDir, filepath.FromSlash(path.Clean(f.Path)))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(p, f.Data, 0o400); err != nil {
			return fail(err)
		}
	}
	// The harness's listeners on free ports; the variables that name the
	// pod's addresses name these instead.
	replace := []string{}
	for _, a := range pod.Listen {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fail(err)
		}
		r.reserved = append(r.reserved, reservedListener{want: a, ln: ln})
		replace = append(replace, a, ln.Addr().String())
	}
	// The plugin's port: a listener handed down.
	pluginLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = pluginLn.Close() }() // the child holds its copy
	lnFile, err := pluginLn.(*net.TCPListener).File()
	if err != nil {
		return fail(err)
	}
	defer func() { _ = lnFile.Close() }()
	realPort := strconv.Itoa(pluginLn.Addr().(*net.TCPAddr).Port)

	rewrite := strings.NewReplacer(replace...)
	env := []string{"HOME=" + dir}
	for _, kv := range pod.Env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == plugins.EnvListenPort:
			r.ports["127.0.0.1:"+value] = "127.0.0.1:" + realPort
			r.ports["localhost:"+value] = "127.0.0.1:" + realPort
			value = realPort
		case strings.HasPrefix(value, "/"):
			if _, err := os.Stat(filepath.Join(fsDir, filepath.FromSlash(value))); err == nil {
				value = filepath.Join(fsDir, filepath.FromSlash(value))
			}
		default:
			value = rewrite.Replace(value)
		}
		env = append(env, name+"="+value)
	}
	env = append(env, "OPENFIEF_LISTEN_FD=3")

	cmd := exec.Command(bin, pod.Args[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = pod.Stdout, pod.Stderr
	cmd.ExtraFiles = []*os.File{lnFile}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start the entrypoint: %w", err))
	}
	r.cmd = cmd
	go func() {
		r.waitErr = cmd.Wait()
		close(r.done)
	}()
	go r.watchMemory(cmd.Process.Pid)
	return r, nil
}

// extractFile copies the regular file name of pod's image to dst, bounded.
func extractFile(pod Pod, name, dst string) error {
	rc := mutate.Extract(pod.Image)
	defer func() { _ = rc.Close() }()
	want := strings.TrimPrefix(path.Clean("/"+name), "/")
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the image has no file %s to run", name)
		}
		if err != nil {
			return fmt.Errorf("read the image: %w", err)
		}
		if strings.TrimPrefix(path.Clean("/"+h.Name), "/") != want || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > maxLocalBinary {
			return fmt.Errorf("%s is larger than %d bytes", name, maxLocalBinary)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o700)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, maxLocalBinary))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

type reservedListener struct {
	want string
	ln   net.Listener
}

type localRuntime struct {
	dir      string
	cmd      *exec.Cmd
	reserved []reservedListener
	// ports maps the plugin's addresses as the pod names them to where it
	// listens here.
	ports map[string]string

	done    chan struct{}
	waitErr error
	once    sync.Once

	// peak is the largest VmHWM seen, in bytes: the process's own
	// high-water mark, read from /proc while it runs (the exit's rusage
	// would count this process's memory too, kept across the exec).
	peak atomic.Int64
}

// watchMemory reads the process's VmHWM every 50ms until it exits.
func (r *localRuntime) watchMemory(pid int) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if hwm, ok := readVMHWM(pid); ok && hwm > r.peak.Load() {
			r.peak.Store(hwm)
		}
		select {
		case <-r.done:
			return
		case <-t.C:
		}
	}
}

// readVMHWM returns the VmHWM line of /proc/PID/status in bytes.
func readVMHWM(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

// CannotSee implements Blind.
func (r *localRuntime) CannotSee() string {
	return "the local-process stand-in runs the plugin in this machine's network, where no direct connection or DNS query is seen"
}

func (r *localRuntime) Listen(network, address string) (net.Listener, error) {
	for i, l := range r.reserved {
		if l.want == address && l.ln != nil {
			r.reserved[i].ln = nil
			return l.ln, nil
		}
	}
	return nil, fmt.Errorf("listen %s: not reserved in Pod.Listen", address)
}

func (r *localRuntime) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if to, ok := r.ports[address]; ok {
		address = to
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (r *localRuntime) Attempts() []Attempt { return nil }

func (r *localRuntime) Signal(sig os.Signal) error {
	if r.cmd == nil || r.cmd.Process == nil {
		return errors.New("not started")
	}
	return r.cmd.Process.Signal(sig)
}

func (r *localRuntime) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
	st := r.cmd.ProcessState
	ws, _ := st.Sys().(syscall.WaitStatus)
	out := ExitStatus{Code: st.ExitCode(), Exited: ws.Exited()}
	if ws.Signaled() {
		out.Signal = ws.Signal().String()
	}
	return out, nil
}

func (r *localRuntime) Usage() (Usage, error) {
	select {
	case <-r.done:
	default:
		return Usage{}, errors.New("the local-process stand-in measures usage only once the process exited")
	}
	ru, ok := r.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return Usage{}, errors.New("no resource usage on this system")
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return Usage{PeakMemoryBytes: r.peak.Load(), CPUSeconds: cpu.Seconds()}, nil
}

func (r *localRuntime) Close() error {
	r.once.Do(func() {
		if r.cmd != nil && r.cmd.Process != nil {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
		for _, l := range r.reserved {
			if l.ln != nil {
				_ = l.ln.Close()
			}
		}
	})
	return os.RemoveAll(r.dir)
}
