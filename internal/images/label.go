package images

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// ManifestLabel is the io.openfief.plugin.manifest label for a
// manifest.json, computed as hack/build/plugin-labels.sh computes the Dockerfiles'
// label: the JSON compacted, byte for byte otherwise, after the operator's
// own ParseManifestLabel accepted it.
func ManifestLabel(manifestJSON []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, manifestJSON); err != nil {
		return "", err
	}
	if _, err := plugins.ParseManifestLabel(buf.String()); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// labels are the config labels of s's image: its manifest label, for a
// plugin, and the OCI annotations (GitHub's registry links a package to its
// repository by the source label).
func labels(root string, s Spec, annotations map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range annotations {
		out[k] = v
	}
	if s.ManifestFile == "" {
		return out, nil
	}
	raw, err := os.ReadFile(filepath.Join(root, s.ManifestFile))
	if err != nil {
		return nil, err
	}
	label, err := ManifestLabel(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.ManifestFile, err)
	}
	out[plugins.ManifestLabel] = label
	return out, nil
}
