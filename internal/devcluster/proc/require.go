package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrMissingBinaries is wrapped by the error Require returns: a binary (or
// the kwok stages file) has not been built yet.
var ErrMissingBinaries = errors.New("control plane binaries not built")

// Require checks that every named file exists in dir, naming all the
// missing ones and the command that builds them.
func Require(dir string, names ...string) error {
	var missing []string
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("devcluster: %v missing from %s: run `make controlplane`: %w", missing, dir, ErrMissingBinaries)
}
