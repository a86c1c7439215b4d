package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ModulePath is the core module, whose root the images are built from.
const ModulePath = "github.com/arkadiuss/openfief"

// Source is the tree the images are built from and what stamps them.
type Source struct {
	// Root is the module root (absolute).
	Root string
	// Commit is HEAD's full hash (org.opencontainers.image.revision).
	Commit string
	// Dirty is empty when the working tree matches HEAD, and otherwise 12
	// hex digits of a hash of the difference (tracked changes and untracked
	// files), so two builds of one edited tree share a cache entry.
	Dirty string
	// Epoch is SOURCE_DATE_EPOCH, or HEAD's commit time: every mtime and
	// created timestamp in the images.
	Epoch time.Time
	// Version is VERSION, or a Go pseudo-version of Epoch and Commit with
	// "+dirty" for an edited tree (org.opencontainers.image.version). A
	// caller may set another to build the same tree as that version (the
	// in-cluster upgrade test builds a second release this way).
	Version string
}

// Key names the source's cache entry: the commit, for an edited tree the
// hash of the edits, and for a version other than the pseudo-version
// ReadSource gives (VERSION, or one a caller set) a hash of that version,
// so builds of one tree as two versions keep an entry each.
func (s Source) Key() string {
	k := s.Commit
	if s.Dirty != "" {
		k += "-dirty-" + s.Dirty
	}
	if s.Version != s.pseudoVersion() {
		sum := sha256.Sum256([]byte(s.Version))
		k += "-version-" + hex.EncodeToString(sum[:])[:12]
	}
	return k
}

// pseudoVersion is the version of the source when VERSION is unset: a Go
// pseudo-version of Epoch and Commit, with "+dirty" for an edited tree.
func (s Source) pseudoVersion() string {
	if len(s.Commit) < 12 {
		return ""
	}
	v := "v0.0.0-" + s.Epoch.UTC().Format("20060102150405") + "-" + s.Commit[:12]
	if s.Dirty != "" {
		v += "+dirty"
	}
	return v
}

// Tag is Version as a registry tag ('+' is not allowed there).
func (s Source) Tag() string { return strings.ReplaceAll(s.Version, "+", "-") }

// FindRoot returns the root of the OpenFief module at or above dir.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if raw, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(raw) == ModulePath {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s source tree at or above %s", ModulePath, dir)
		}
	}
}

// modulePath is the module line of a go.mod.
func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// ReadSource reads root's git state. SOURCE_DATE_EPOCH (seconds) and
// VERSION in the environment override the commit time and the version.
func ReadSource(ctx context.Context, root string) (Source, error) {
	s := Source{Root: root}
	out, err := git(ctx, root, "log", "-1", "--format=%H %ct")
	if err != nil {
		return Source{}, fmt.Errorf("images are stamped with the commit they are built from: %w", err)
	}
	hash, ct, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok {
		return Source{}, fmt.Errorf("git log: unexpected output %q", out)
	}
	s.Commit = hash
	epoch := ct
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		epoch = v
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec < 0 {
		return Source{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", epoch)
	}
	s.Epoch = time.Unix(sec, 0).UTC()
	if s.Dirty, err = dirtyHash(ctx, root); err != nil {
		return Source{}, err
	}
	s.Version = os.Getenv("VERSION")
	if s.Version == "" {
		s.Version = s.pseudoVersion()
	}
	return s, nil
}

// dirtyHash is empty for a tree that matches HEAD, and otherwise hashes
// the tracked changes and every untracked, not ignored file.
func dirtyHash(ctx context.Context, root string) (string, error) {
	status, err := git(ctx, root, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(status)) == 0 {
		return "", nil
	}
	h := sha256.New()
	diff, err := git(ctx, root, "diff", "HEAD", "--binary")
	if err != nil {
		return "", err
	}
	h.Write(diff)
	untracked, err := git(ctx, root, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return "", err
	}
	for name := range strings.SplitSeq(strings.TrimRight(string(untracked), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		fmt.Fprintf(h, "\x00%s\x00%d\x00", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// git runs git in dir and returns its standard output.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
