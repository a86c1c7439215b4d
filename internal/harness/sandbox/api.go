package sandbox

import (
	"errors"
	"io"
)

// Config is what an image's config says to run. The harness resolves it
// into a Spec; User is informational, Spec.UID and Spec.GID are what runs.
type Config struct {
	Entrypoint, Cmd, Env []string
	WorkingDir           string
	User                 string // as in the image config; Spec.UID/GID is what runs
	Labels               map[string]string
}

// Limits are the bounds of the sandbox's cgroup. Zero means the default
// named beside each field.
type Limits struct {
	MemoryBytes int64 // memory.max (memory.limit_in_bytes on cgroup v1); default 128 MiB
	CPUMilli    int64 // cpu.max (cpu.cfs_quota_us on cgroup v1); default 500
	Pids        int64 // pids.max; default 1024
	// TmpBytes is the size of the in-memory /tmp, counted against
	// MemoryBytes as the operator's emptyDir is; default 64 MiB.
	TmpBytes int64
}

// Spec is one process to run in a sandbox.
type Spec struct {
	RootFS   string   // an absolute path, usually a folder Unpack wrote
	Args     []string // Entrypoint+Cmd resolved; Args[0] is looked up in Env's PATH inside RootFS
	Env      []string
	Dir      string // the working directory inside RootFS; "/" when empty
	UID, GID uint32
	Limits   Limits
	// ResolvConf is written to RootFS/etc/resolv.conf before the start (as
	// a kubelet does); empty means an empty file.
	ResolvConf string
	// Hostname is the UTS name the process sees; "plugin" when empty.
	Hostname       string
	Stdout, Stderr io.Writer // the plugin's output (bounded by the caller); discarded when nil
	// Listen are TCP addresses on the sandbox's loopback opened before the
	// process starts, so a plugin that calls the egress proxy or the core
	// in its first instruction finds them listening; Sandbox.Listen hands
	// each out once.
	Listen []string
}

// Attempt is one thing the plugin tried outside loopback, or one DNS query.
type Attempt struct {
	Protocol string // "tcp", "udp", "icmp", "dns"
	Address  string // destination host:port (or host)
	Query    string // for "dns": the name asked, cleaned (printable, bounded)
}

// ExitStatus is how the sandbox's process ended. Exited is true when it
// called exit (Code holds its status) and false when a signal ended it
// (Signal holds the signal's name, such as "SIGKILL").
type ExitStatus struct {
	Code   int
	Signal string
	Exited bool
}

// Usage is what the sandbox's cgroup measured.
type Usage struct {
	PeakMemoryBytes int64
	CPUSeconds      float64
	OOMKilled       bool
}

// Errors Start and Unpack return, to be told apart with errors.Is.
var (
	// ErrTooBig: an image's files exceed Unpack's maxBytes or entry bound.
	ErrTooBig = errors.New("image root file system too big")
	// ErrUnsupported: the sandbox runs on Linux only.
	ErrUnsupported = errors.New("the plugin sandbox runs on Linux only")
	// ErrNeedsRoot: Start needs root (namespaces, mounts, cgroups).
	ErrNeedsRoot = errors.New("the plugin sandbox needs root")
	// ErrNoCgroup: no cgroup with the memory, cpu and pids controllers can
	// be made, so the limits could not be enforced.
	ErrNoCgroup = errors.New("no cgroup with the memory, cpu and pids controllers can be made")
	// ErrClosed: the sandbox was closed.
	ErrClosed = errors.New("sandbox closed")
)

// The defaults of Limits' zero fields.
const (
	DefaultMemoryBytes int64 = 128 << 20
	DefaultCPUMilli    int64 = 500
	DefaultPids        int64 = 1024
	DefaultTmpBytes    int64 = 64 << 20
)

// withDefaults fills Limits' zero fields.
func (l Limits) withDefaults() Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.CPUMilli <= 0 {
		l.CPUMilli = DefaultCPUMilli
	}
	if l.Pids <= 0 {
		l.Pids = DefaultPids
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = DefaultTmpBytes
	}
	return l
}
