// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// maxTokenBytes bounds what a token file may hold. Kubernetes tokens are a
// few kilobytes; anything far larger is not a token.
const maxTokenBytes = 64 << 10

// ErrEmptyToken is returned when a token file holds nothing but white space.
var ErrEmptyToken = errors.New("token file is empty")

// TokenFile is a projected ServiceAccount token on disk, such as the
// openfief-core token or the openfief-egress token. The kubelet
// rotates such tokens by swapping symbolic links inside the file's
// directory, so Read opens the file afresh on every call, through an os.Root
// of that directory: a link may move within the directory but never leads
// out of it.
type TokenFile struct {
	dir  string
	name string
}

// NewTokenFile returns the TokenFile at path. It only checks that path names
// a file inside a directory; the file is read by Read.
func NewTokenFile(path string) (TokenFile, error) {
	if path == "" {
		return TokenFile{}, errors.New("token file: empty path")
	}
	dir, name := filepath.Split(filepath.Clean(path))
	if name == "" || name == "." || name == ".." || name == string(filepath.Separator) {
		return TokenFile{}, fmt.Errorf("token file %q: not a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	return TokenFile{dir: dir, name: name}, nil
}

// CoreTokenFile returns the plugin's openfief-core token file: the path in
// OPENFIEF_TOKEN_FILE, or DefaultTokenPath when that is unset.
func CoreTokenFile() (TokenFile, error) {
	path := os.Getenv(EnvTokenFile)
	if path == "" {
		path = DefaultTokenPath
	}
	return NewTokenFile(path)
}

// Path is the token file's path, for messages; it is not a secret.
func (t TokenFile) Path() string { return filepath.Join(t.dir, t.name) }

// Read returns the token the file holds now, with surrounding white space
// removed. It reads the file on every call, so a token the kubelet rotated is
// used at once. Errors name the file, never its content.
func (t TokenFile) Read() (string, error) {
	if t.name == "" {
		return "", errors.New("token file: no path configured")
	}
	b, err := readInRoot(t.dir, t.name, maxTokenBytes)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", t.Path(), err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "", fmt.Errorf("token file %s: %w", t.Path(), ErrEmptyToken)
	}
	for _, c := range b {
		// A token goes into an HTTP header or a URL's user info: only
		// printable ASCII without spaces may appear in it.
		if c <= ' ' || c >= 0x7f {
			return "", fmt.Errorf("token file %s: holds a byte a token never contains", t.Path())
		}
	}
	return string(b), nil
}
