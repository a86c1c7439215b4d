// Command pluginlabels writes or checks the io.openfief.plugin.manifest
// label of every first-party plugin image (D-42): for each plugins/<name>
// with a manifest.json, the Dockerfile's final stage must carry
//
//	LABEL io.openfief.plugin.manifest='<manifest.json compacted>'
//
// and run as USER 65532:65532. Run it through hack/plugin-labels.sh:
// "write" rewrites the label lines, "check" fails when one differs.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// labelPrefix starts the one LABEL line that carries the manifest.
const labelPrefix = "LABEL " + plugins.ManifestLabel + "="

// nonrootUser is distroless's nonroot user, written numerically so the
// kubelet can tell it is not root.
const nonrootUser = "USER 65532:65532"

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "write" && os.Args[1] != "check") {
		fmt.Fprintln(os.Stderr, "usage: pluginlabels write|check <plugins dir>")
		os.Exit(2)
	}
	if err := run(os.Args[1] == "write", os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run handles every plugins/<name>/manifest.json under dir, writing or
// checking its Dockerfile, and returns every problem found, joined.
func run(write bool, dir string) error {
	manifests, err := filepath.Glob(filepath.Join(dir, "*", "manifest.json"))
	if err != nil {
		return err
	}
	if len(manifests) == 0 {
		return fmt.Errorf("no %s/*/manifest.json", dir)
	}
	slices.Sort(manifests)
	var errs []error
	for _, m := range manifests {
		if err := one(write, m, filepath.Join(filepath.Dir(m), "Dockerfile")); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 && !write {
		errs = append(errs, errors.New("run hack/plugin-labels.sh write and commit the Dockerfiles"))
	}
	return errors.Join(errs...)
}

// one writes or checks the Dockerfile of one manifest.
func one(write bool, manifestPath, dockerfilePath string) error {
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	label, err := Label(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", manifestPath, err)
	}
	df, err := os.ReadFile(dockerfilePath)
	if err != nil {
		return err
	}
	want, err := WithLabel(df, label)
	if err != nil {
		return fmt.Errorf("%s: %w", dockerfilePath, err)
	}
	if bytes.Equal(want, df) {
		return nil
	}
	if !write {
		return fmt.Errorf("%s: the %s label differs from %s", dockerfilePath, plugins.ManifestLabel, manifestPath)
	}
	return os.WriteFile(dockerfilePath, want, 0o644)
}

// Label returns the label value for a manifest.json: the JSON compacted,
// byte for byte otherwise, after checking that ParseManifestLabel accepts
// it and that it can sit inside a Dockerfile's single quotes.
func Label(manifest []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, manifest); err != nil {
		return "", err
	}
	label := buf.String()
	if _, err := plugins.ParseManifestLabel(label); err != nil {
		return "", err
	}
	// Inside single quotes a Dockerfile takes everything literally, but a
	// quote would end the value and a backslash could be read as an escape.
	if strings.ContainsAny(label, "'\\\n") {
		return "", errors.New(`the compacted manifest holds a ', a \ or a newline, which a single-quoted Dockerfile LABEL cannot carry`)
	}
	return label, nil
}

// WithLabel returns the Dockerfile df with its one manifest LABEL line set
// to label. The line must be in the final stage, which must also hold
// USER 65532:65532.
func WithLabel(df []byte, label string) ([]byte, error) {
	lines := strings.Split(string(df), "\n")
	lastFrom, at, user := -1, -1, -1
	for i, l := range lines {
		fields := strings.Fields(l)
		switch {
		case len(fields) > 0 && strings.EqualFold(fields[0], "FROM"):
			lastFrom = i
		case strings.HasPrefix(l, labelPrefix):
			if at >= 0 {
				return nil, fmt.Errorf("more than one %s line", labelPrefix)
			}
			at = i
		case strings.TrimSpace(l) == nonrootUser:
			user = i
		}
	}
	switch {
	case at < 0:
		return nil, fmt.Errorf("no line starting %s", labelPrefix)
	case at < lastFrom:
		return nil, errors.New("the manifest label is not in the final stage")
	case user < lastFrom:
		return nil, fmt.Errorf("the final stage has no %s", nonrootUser)
	}
	lines[at] = labelPrefix + "'" + label + "'"
	return []byte(strings.Join(lines, "\n")), nil
}
