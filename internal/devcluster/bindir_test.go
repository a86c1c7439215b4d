package devcluster_test

import (
	"errors"
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
