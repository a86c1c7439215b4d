// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvSecretsRoot names the variable that, when set, holds a directory
// standing in for the root of the file system for the plugin's Secret
// mounts: SecretDir then finds the Secret the manifest mounts at /etc/x
// under <root>/etc/x. Only a
// runner that starts the plugin outside a pod sets it (`openfief dev
// --local-plugins`, whose processes cannot mount anything at /etc/x). The
// operator never sets it, so in a pod SecretDir returns the mount path
// itself.
const EnvSecretsRoot = "OPENFIEF_SECRETS_ROOT"

// SecretDir returns the directory holding the files of the Secret the
// plugin's manifest mounts at mountPath (a manifest's secrets[].mountPath:
// absolute and clean). That is mountPath itself, or, when
// OPENFIEF_SECRETS_ROOT is set, mountPath under that directory. Call it
// with the manifest's mount path and read the Secret's keys as files there,
// on every use if the Secret may change.
func SecretDir(mountPath string) (string, error) {
	return secretDir(os.Getenv(EnvSecretsRoot), mountPath)
}

// secretDir maps mountPath under root ("" for none). Both must be
// absolute and clean, and mountPath must not be "/", so the result always
// lies strictly inside root.
func secretDir(root, mountPath string) (string, error) {
	if err := absoluteClean(mountPath); err != nil {
		return "", fmt.Errorf("secret mount path %q: %w", mountPath, err)
	}
	if mountPath == "/" {
		return "", errors.New(`secret mount path "/": a Secret is never mounted at the root`)
	}
	if root == "" {
		return mountPath, nil
	}
	if err := absoluteClean(root); err != nil {
		return "", fmt.Errorf("%s %q: %w", EnvSecretsRoot, root, err)
	}
	return filepath.Join(root, mountPath), nil
}

// absoluteClean refuses a path that is relative or not in its clean form
// (a "..", ".", doubled or trailing slash).
func absoluteClean(p string) error {
	switch {
	case !filepath.IsAbs(p):
		return errors.New("not an absolute path")
	case filepath.Clean(p) != p:
		return errors.New(`not a clean path (no ".", ".." or repeated or trailing "/")`)
	}
	return nil
}
