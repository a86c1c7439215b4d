// Package deploy embeds the install manifests, so the local mode and the
// end-to-end suite install exactly what a cluster admin applies with
// `kubectl apply -k deploy/crds`.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// crds holds the generated CRDs and the openfief namespace.
//
//go:embed crds/openfief.io_plugins.yaml crds/openfief.io_plugingrants.yaml crds/namespace.yaml
var crds embed.FS

// Namespace is deploy/crds/namespace.yaml: the openfief namespace enforcing
// the restricted Pod Security Standard.
func Namespace() []byte {
	b, err := crds.ReadFile("crds/namespace.yaml")
	if err != nil {
		panic(err) // embedded at build time
	}
	return b
}

// WriteCRDs writes the two CRDs (and nothing else) into dir, for a control
// plane that installs every CRD found in a directory.
func WriteCRDs(dir string) error {
	for _, name := range []string{"openfief.io_plugins.yaml", "openfief.io_plugingrants.yaml"} {
		b, err := fs.ReadFile(crds, "crds/"+name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("write CRD: %w", err)
		}
	}
	return nil
}
