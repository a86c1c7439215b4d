package testutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// RepoRoot is the repository's root: the nearest directory above the
// working directory (a test runs in its package's directory) that holds
// go.work. It does not use the source file's path, which -trimpath (make
// test builds with it, as the images are built) turns into an import path.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.work above %s: run the tests from the repository", wd)
		}
	}
}

// MustRepoRoot is RepoRoot for test helpers; it panics where RepoRoot fails,
// which only happens outside a checkout.
func MustRepoRoot() string {
	root, err := RepoRoot()
	if err != nil {
		panic(err)
	}
	return root
}
