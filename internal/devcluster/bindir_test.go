//go:build cluster

package devcluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

func TestStartWithoutBinaries(t *testing.T) {
	for _, mode := range []devcluster.Mode{devcluster.Minimal, devcluster.Full} {
		t.Run(mode.String(), func(t *testing.T) {
			c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: mode, BinDir: t.TempDir()})
			if err == nil {
				_ = c.Stop() // the test fails either way
				t.Fatal("Start succeeded without binaries")
			}
			if !errors.Is(err, devcluster.ErrMissingBinaries) || !strings.Contains(err.Error(), "make controlplane") {
				t.Errorf("err = %v; want ErrMissingBinaries telling to run make controlplane", err)
			}
			if mode == devcluster.Full && !strings.Contains(err.Error(), "kwok") {
				t.Errorf("err = %v; want kwok named as missing", err)
			}
		})
	}
}

func TestBinDirFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(devcluster.BinDirEnv, dir)
	got, err := devcluster.BinDir()
	if err != nil || got != dir {
		t.Errorf("BinDir() = %q, %v; want %q", got, err, dir)
	}
}

func TestBinDirFromRepository(t *testing.T) {
	t.Setenv(devcluster.BinDirEnv, "")
	got, err := devcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// The tests run in internal/devcluster; the repository root is two up.
	want, _ := filepath.Abs("../../.bin")
	if got != want {
		t.Errorf("BinDir() = %q; want %q", got, want)
	}
}

func TestRealNodeOptionsRefused(t *testing.T) {
	for name, opts := range map[string]devcluster.Options{
		"minimal mode":  {Mode: devcluster.Minimal, Node: devcluster.NodeReal},
		"two nodes":     {Mode: devcluster.Full, Node: devcluster.NodeReal, Nodes: 2},
		"unknown kind":  {Mode: devcluster.Full, Node: devcluster.NodeKind(7)},
		"negative kind": {Mode: devcluster.Full, Node: devcluster.NodeKind(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := devcluster.Start(t.Context(), opts)
			if err == nil {
				_ = c.Stop() // the test fails either way
				t.Fatal("Start accepted the options")
			}
		})
	}
}

// TestRealNodeWithoutNodeBinaries gives Start the control plane's binaries
// but not the node's: it names them and `make node` (or, not as root, that
// a real node needs root), before changing anything on the machine.
func TestRealNodeWithoutNodeBinaries(t *testing.T) {
	bin, err := devcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := os.Symlink(filepath.Join(bin, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Full, Node: devcluster.NodeReal, BinDir: dir})
	if err == nil {
		_ = c.Stop() // the test fails either way
		t.Fatal("Start succeeded without the node's binaries")
	}
	switch {
	case os.Geteuid() != 0:
		if !errors.Is(err, devcluster.ErrNodeNeedsRoot) {
			t.Errorf("err = %v; want ErrNodeNeedsRoot", err)
		}
	case !errors.Is(err, devcluster.ErrMissingBinaries) || !strings.Contains(err.Error(), "make node") || !strings.Contains(err.Error(), "kubelet"):
		t.Errorf("err = %v; want ErrMissingBinaries naming kubelet and make node", err)
	}
	// Other packages' tests may run a node meanwhile: only this process's
	// folders count.
	entries, _ := os.ReadDir(devcluster.NodeStateRoot)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(devcluster.NodeStateRoot, e.Name(), "state.json"))
		if strings.Contains(string(data), fmt.Sprintf(`"owner": %d,`, os.Getpid())) {
			t.Errorf("a state folder was made: %s", e.Name())
		}
	}
}
