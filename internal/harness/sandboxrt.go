//go:build linux

// The sandbox of internal/harness/sandbox as the harness's Runtime: what
// `openfief plugin test` runs on Linux.

package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/arkadiuss/openfief/internal/harness/sandbox"
)

func init() {
	NewRuntime = startSandbox
	sandboxBuiltIn = true
}

// maxRootFSBytes bounds the file content Unpack writes of an image.
const maxRootFSBytes = 2 << 30

// startSandbox unpacks pod.Image into a temporary directory, writes pod's
// files into it through an os.Root (a symbolic link of the image cannot send
// a write outside it), and starts the sandbox there.
func startSandbox(ctx context.Context, pod Pod) (Runtime, error) {
	dir, err := os.MkdirTemp("", "openfief-plugin-test-")
	if err != nil {
		return nil, err
	}
	rootfs := filepath.Join(dir, "rootfs")
	fail := func(err error) (Runtime, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return fail(err)
	}
	if _, err := sandbox.Unpack(ctx, pod.Image, rootfs, maxRootFSBytes); err != nil {
		return fail(fmt.Errorf("unpack the image: %w", err))
	}
	if err := writeFiles(rootfs, pod.Files, pod.Dirs, pod.UID, pod.GID); err != nil {
		return fail(err)
	}
	sb, err := sandbox.Start(ctx, sandbox.Spec{
		RootFS: rootfs, Args: pod.Args, Env: pod.Env, Dir: pod.Dir, UID: pod.UID, GID: pod.GID,
		Limits:     sandbox.Limits{MemoryBytes: pod.Limits.MemoryBytes, CPUMilli: pod.Limits.CPUMilli, Pids: pod.Limits.Pids},
		ResolvConf: pod.ResolvConf, Stdout: pod.Stdout, Stderr: pod.Stderr,
		Listen: pod.Listen,
	})
	if err != nil {
		return fail(err)
	}
	return &sandboxRuntime{sb: sb, dir: dir}, nil
}

// writeFiles writes each file under root, its directories made as needed,
// owned by uid:gid as the kubelet gives projected tokens to RunAsUser, and
// makes each of dirs an empty folder the plugin can read but not write (a
// Secret's read-only mount without its keys).
func writeFiles(rootfs string, files []File, dirs []string, uid, gid uint32) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range dirs {
		rel := filepath.Clean("." + d)
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return fmt.Errorf("mount %s: %w", d, err)
		}
		if err := root.Chmod(rel, 0o555); err != nil {
			return fmt.Errorf("mount %s: %w", d, err)
		}
	}
	for _, f := range files {
		rel := filepath.Clean("." + f.Path)
		if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := root.WriteFile(rel, f.Data, 0o444); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := root.Lchown(rel, int(uid), int(gid)); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

type sandboxRuntime struct {
	sb  *sandbox.Sandbox
	dir string
}

func (r *sandboxRuntime) Listen(network, address string) (net.Listener, error) {
	return r.sb.Listen(network, address)
}

func (r *sandboxRuntime) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return r.sb.DialContext(ctx, network, address)
}

func (r *sandboxRuntime) Attempts() []Attempt {
	var out []Attempt
	for _, a := range r.sb.Attempts() {
		out = append(out, Attempt{Protocol: a.Protocol, Address: a.Address, Query: a.Query})
	}
	return out
}

func (r *sandboxRuntime) Signal(sig os.Signal) error { return r.sb.Signal(sig) }

func (r *sandboxRuntime) Wait(ctx context.Context) (ExitStatus, error) {
	s, err := r.sb.Wait(ctx)
	return ExitStatus{Code: s.Code, Signal: s.Signal, Exited: s.Exited}, err
}

func (r *sandboxRuntime) Usage() (Usage, error) {
	u, err := r.sb.Usage()
	return Usage{PeakMemoryBytes: u.PeakMemoryBytes, CPUSeconds: u.CPUSeconds, OOMKilled: u.OOMKilled}, err
}

func (r *sandboxRuntime) Close() error {
	err := r.sb.Close()
	if rerr := os.RemoveAll(r.dir); err == nil {
		err = rerr
	}
	return err
}
