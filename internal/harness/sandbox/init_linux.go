package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// initArg0 is the name the sandbox's process starts under: the harness's
// own binary, run again as PID 1 of the new namespaces, sets the root file
// system up, drops every privilege and executes the plugin (see runInit).
const initArg0 = "openfief-sandbox-init"

// The descriptors the init inherits: its config, and a pipe for the reason
// it failed (closed, empty, by a successful exec).
const (
	initConfigFD = 3
	initErrorFD  = 4
)

// initConfig is what Start sends the init.
type initConfig struct {
	RootFS   string
	Args     []string
	Env      []string
	Dir      string
	UID, GID uint32
	Hostname string
	TmpBytes int64
}

// defaultPath is where Args[0] is looked up when Env sets no PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func init() {
	if len(os.Args) != 1 || os.Args[0] != initArg0 || os.Getpid() != 1 {
		return
	}
	runtime.LockOSThread() // the thread that drops privileges is the one that executes
	syscall.CloseOnExec(initErrorFD)
	err := runInit()
	msg := printable(err.Error(), 2000)
	_, _ = os.NewFile(initErrorFD, "init-errors").WriteString(msg)
	os.Exit(127)
}

// runInit prepares the root file system and executes the plugin; it
// returns only on failure.
func runInit() error {
	f := os.NewFile(initConfigFD, "init-config")
	raw, err := io.ReadAll(io.LimitReader(f, 1<<20))
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("reading the config: %w", err)
	}
	var c initConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("reading the config: %w", err)
	}
	if err := enterRoot(c.RootFS); err != nil {
		return err
	}
	if err := mountAll(c.TmpBytes); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	dir := c.Dir
	if dir == "" {
		dir = "/"
	}
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("working directory %q: %w", printable(dir, 200), err)
	}
	exe, err := lookPath(c.Args[0], c.Env)
	if err != nil {
		return err
	}
	if err := dropPrivileges(c.UID, c.GID); err != nil {
		return err
	}
	err = unix.Exec(exe, c.Args, c.Env)
	return fmt.Errorf("executing %q: %w", printable(exe, 200), err)
}

// enterRoot makes root the process's "/" with pivot_root, in a mount
// namespace whose mounts reach no other.
func enterRoot(root string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting the root: %w", err)
	}
	oldRoot, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(oldRoot) }() // a folder
	newRoot, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(newRoot) }() // a folder
	// pivot_root(".", ".") stacks the old root on the new one; detaching
	// it leaves the new one alone, with no folder needed for the old.
	if err := unix.Fchdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Fchdir(oldRoot); err != nil {
		return err
	}
	if err := unix.Mount("", ".", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	return unix.Chdir("/")
}

// mountAll mounts /dev, /tmp and /proc as a container runtime does for a
// pod with readOnlyRootFilesystem, then makes "/" read-only. Everything is
// resolved inside the new root, and /proc comes last, so no symbolic link
// of the image can lead a mount or a write into the kernel's files.
func mountAll(tmpBytes int64) error {
	for _, d := range []string{"/dev", "/tmp", "/proc"} {
		if err := mountPoint(d); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=65536"); err != nil {
		return fmt.Errorf("mounting /dev: %w", err)
	}
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		p := "/dev/" + d.name
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("making %s: %w", p, err)
		}
		if err := unix.Chmod(p, 0o666); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := unix.Symlink(target, "/dev/"+name); err != nil {
			return err
		}
	}
	if err := unix.Mkdir("/dev/shm", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("shm", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=65536k"); err != nil {
		return fmt.Errorf("mounting /dev/shm: %w", err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=1777,size=%d", tmpBytes)); err != nil {
		return fmt.Errorf("mounting /tmp: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	// As a container runtime does: the kernel's settings read-only, a few
	// files that tell about the host masked.
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("read-only %s: %w", p, err)
		}
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats"} {
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("masking %s: %w", p, err)
		}
	}
	return nil
}

// mountPoint makes a folder for a mount, refusing anything else the image
// put there (a symbolic link above all).
func mountPoint(p string) error {
	var st unix.Stat_t
	err := unix.Lstat(p, &st)
	if errors.Is(err, unix.ENOENT) {
		return unix.Mkdir(p, 0o755)
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("the image's %s is not a folder", p)
	}
	return nil
}

// lookPath finds the program as execve would with the image's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	search := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, dir := range strings.Split(search, ":") {
		if dir == "" {
			dir = "."
		}
		p := path.Join(dir, name)
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH %q", printable(name, 200), printable(search, 400))
}

// dropPrivileges becomes uid:gid with no supplementary groups, no
// capability (none permitted, none in the bounding or ambient sets, so
// not even uid 0 gets any back at exec) and no_new_privs. The bounding
// set and no_new_privs are per thread: this is the thread that executes.
func dropPrivileges(uid, gid uint32) error {
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break
			}
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	var data [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return fmt.Errorf("clearing capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}
