package devcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// BinDirEnv names the environment variable that overrides where the control
// plane binaries are looked up.
const BinDirEnv = "OPENFIEF_BIN_DIR"

// Names of the files `make controlplane` links into the binary directory.
const (
	etcdBin              = "etcd"
	apiServerBin         = "kube-apiserver"
	controllerManagerBin = "kube-controller-manager"
	schedulerBin         = "kube-scheduler"
	kwokBin              = "kwok"
	kwokStagesFile       = "kwok-stages.yaml"
)

// BinDir returns the directory holding the control plane binaries: the value
// of OPENFIEF_BIN_DIR if set, else .bin/ at the root of the repository, found
// by walking up from the working directory to the directory holding go.work.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("devcluster: finding the binary directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, ".bin"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("devcluster: no go.work above %s to find .bin/ from; set %s", wd, BinDirEnv)
		}
	}
}

// requireFiles checks that every named file exists in dir, naming all the
// missing ones and the command that builds them.
func requireFiles(dir string, names ...string) error { return proc.Require(dir, names...) }

// ErrMissingBinaries is wrapped by the error Start returns when a binary or
// the kwok stages file has not been built yet.
var ErrMissingBinaries = proc.ErrMissingBinaries
