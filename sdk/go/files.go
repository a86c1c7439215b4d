// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"fmt"
	"io"
	"os"
)

// readInRoot reads name through an os.Root of dir, refusing files larger
// than limit bytes. Symbolic links may move within dir but not leave it.
func readInRoot(dir, name string, limit int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return readRootFile(root, name, limit)
}

// readRootFile reads name in root, refusing files larger than limit bytes.
func readRootFile(root *os.Root, name string, limit int64) ([]byte, error) {
	b, _, err := readRootFileStamped(root, name, limit)
	return b, err
}

// readRootFileStamped reads name in root, refusing files larger than limit
// bytes, and returns the stamp of the open file it read: that of exactly
// the bytes returned, even if the name moves to another file meanwhile.
func readRootFileStamped(root *os.Root, name string, limit int64) ([]byte, fileStamp, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, fileStamp{}, err
	}
	defer f.Close() //nolint:errcheck // opened read-only: a failed Close loses nothing
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fileStamp{}, err
	}
	if int64(len(b)) > limit {
		return nil, fileStamp{}, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, stampOf(fi), nil
}
