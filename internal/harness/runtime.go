package harness

import (
	"context"
	"errors"
	"io"
	"net"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Pod is what the harness asks a runtime to run: one plugin container as the
// operator's pod spec would make it, without Kubernetes. Paths are the ones
// the plugin sees (its root file system's), as in the pod.
type Pod struct {
	// Image is the plugin's image for this machine's platform.
	Image v1.Image
	// Args is the image's entrypoint and command, resolved.
	Args []string
	// Env is the container's environment, NAME=VALUE: the image's, then the
	// operator's (OPENFIEF_*, HTTPS_PROXY, NO_PROXY, OPENFIEF_CONFIG).
	Env []string
	// Dir is the working directory, from the image ("/" when unset).
	Dir string
	// UID and GID are what the process runs as: the operator's 65532:65532,
	// whatever the image says.
	UID, GID uint32
	// Files are written before the start, read-only, where the kubelet would
	// mount them: the projected tokens and the openfief-sa-jwks ConfigMap.
	Files []File
	// Dirs are empty read-only folders made before the start: the mounts of
	// the manifest's Secrets, whose keys only an owner could give.
	Dirs []string
	// Limits bound the process as the operator's container resources do.
	Limits Limits
	// ResolvConf is the resolver configuration the kubelet would write.
	ResolvConf string
	// Listen are the loopback addresses the harness will Listen on once the
	// process runs (the egress proxy's); a runtime that cannot give those
	// exact addresses reserves them before the start and puts its own in
	// Env instead.
	Listen []string
	// Stdout and Stderr receive the plugin's output; the harness bounds it.
	Stdout, Stderr io.Writer
}

// File is one file the runtime writes into the plugin's file system.
type File struct {
	Path string
	Data []byte
}

// Limits are the cgroup's bounds.
type Limits struct {
	MemoryBytes int64
	CPUMilli    int64
	Pids        int64
}

// Attempt is a connection or DNS query the plugin tried other than through
// loopback: what the platform's NetworkPolicy and missing DNS refuse.
type Attempt struct {
	Protocol string // "tcp", "udp", "icmp", "dns"
	Address  string // destination host:port (or host)
	Query    string // for "dns": the name asked, cleaned
}

// ExitStatus is how the plugin's process ended.
type ExitStatus struct {
	Code   int
	Signal string
	Exited bool
}

// Usage is what the plugin's process used, at its peak.
type Usage struct {
	PeakMemoryBytes int64
	CPUSeconds      float64
	OOMKilled       bool
}

// Runtime is one running plugin, shaped like internal/harness/sandbox's
// Sandbox: the harness reaches the plugin's loopback through it, and reads
// what it tried and used.
type Runtime interface {
	// Listen opens a listener on the plugin's loopback.
	Listen(network, address string) (net.Listener, error)
	// DialContext connects to the plugin's loopback.
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
	// Attempts lists what the plugin tried outside loopback, in order.
	Attempts() []Attempt
	Signal(sig os.Signal) error
	// Wait waits for the process to exit or ctx to end.
	Wait(ctx context.Context) (ExitStatus, error)
	Usage() (Usage, error)
	// Close kills what still runs and removes what the runtime made; safe
	// to call twice.
	Close() error
}

// Blind is implemented by a runtime that cannot see some of what the
// checks judge; Blind says what, and the checks it concerns are skipped.
type Blind interface {
	// CannotSee returns why the network check cannot be judged, or "".
	CannotSee() string
}

// Starter starts a plugin as pod describes.
type Starter func(ctx context.Context, pod Pod) (Runtime, error)

// ErrNoSandbox is what NewRuntime returns on a build or system without the
// sandbox.
var ErrNoSandbox = errors.New("this build of openfief has no plugin sandbox for this system: the conformance harness runs on Linux, as root")

// NewRuntime is how `openfief plugin test` runs a plugin: the sandbox of
// internal/harness/sandbox (sandboxrt.go) where it is built in, else a
// Starter that returns ErrNoSandbox.
var NewRuntime Starter = func(context.Context, Pod) (Runtime, error) { return nil, ErrNoSandbox }

// sandboxBuiltIn is true when sandboxrt.go set NewRuntime.
var sandboxBuiltIn bool
