package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// nodeSuite is the Debian release whose nodejs a TypeScript plugin image
// runs.
const nodeSuite = "trixie"

// nodeKeyrings is where Debian's archive keys are (debian-archive-keyring).
const nodeKeyrings = "/usr/share/keyrings"

// nodeSources is the apt sources file of the private apt root NodeRuntime
// resolves in: the suite, its updates and its security archive, each
// checked against Debian's keys for the suite.
var nodeSources = fmt.Sprintf(`Types: deb
URIs: http://deb.debian.org/debian
Suites: %[1]s %[1]s-updates
Components: main
Signed-By: %[2]s/debian-archive-%[1]s-automatic.gpg %[2]s/debian-archive-%[1]s-stable.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: %[1]s-security
Components: main
Signed-By: %[2]s/debian-archive-%[1]s-security-automatic.gpg
`, nodeSuite, nodeKeyrings)

// nodeRuntimeKey names the cache folder of the runtimes this recipe
// resolves: a changed suite or source list starts a new one.
func nodeRuntimeKey() string {
	sum := sha256.Sum256([]byte("node-runtime v1\n" + nodeSources))
	return hex.EncodeToString(sum[:8])
}

// NodeRuntime returns the directory of Debian's Node.js for arch (amd64 or
// arm64): the suite's nodejs and the packages it depends on (nothing
// recommended), unpacked and cached per user. The directory holds
//
//	rootfs/        the packages' files, as dpkg-deb -x unpacks them (no
//	               maintainer scripts run);
//	packages.tsv   one line per package: name, version, architecture and the
//	               SHA-256 of its .deb, sorted; the image's SBOM lists them.
//
// apt-get resolves and downloads the packages in a private root of its own
// (its own sources, lists and an empty dpkg status), so the machine's apt
// state is neither read nor changed. apt checks the archive's Release files
// against Debian's keys (debian-archive-keyring, which `make test-deps`
// installs) and every .deb against the SHA-256 the signed index gives:
// nothing unsigned is unpacked.
//
// The archive moves at point releases and security updates, and
// snapshot.debian.org is not reachable from where this project builds, so a
// runtime is resolved once and then reused until the cache is removed or
// NODE_RUNTIME_REFRESH=1 is set (docs/decisions.md: the TypeScript plugin
// image). Rebuilding an image from the same cache gives the same bytes.
func NodeRuntime(ctx context.Context, arch string) (string, error) {
	if arch != "amd64" && arch != "arm64" {
		return "", fmt.Errorf("node runtime: architecture %s: want amd64 or arm64", arch)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	cache := filepath.Join(base, "openfief", "node-runtime", nodeRuntimeKey())
	out := filepath.Join(cache, arch)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// One resolver at a time: tests of several packages may build at once.
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(out, "packages.tsv")); err == nil && os.Getenv("NODE_RUNTIME_REFRESH") != "1" {
		return out, nil
	}
	for _, k := range []string{"automatic", "stable", "security-automatic"} {
		p := filepath.Join(nodeKeyrings, "debian-archive-"+nodeSuite+"-"+k+".gpg")
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			return "", fmt.Errorf("node runtime: %s missing: install Debian's debian-archive-keyring (make test-deps installs it)", p)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp(cache, "work.")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	rootfs, packages, err := resolveNode(ctx, work, arch)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(out); err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(rootfs, filepath.Join(out, "rootfs")); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, "packages.tsv"), []byte(packages), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "node runtime: %d packages for %s in %s\n", strings.Count(packages, "\n"), arch, out)
	return out, nil
}

// resolveNode downloads nodejs and its dependencies for arch with apt-get in
// a private root under work, unpacks them into work/rootfs and returns that
// folder and the sorted package list.
func resolveNode(ctx context.Context, work, arch string) (rootfs, packages string, err error) {
	apt := filepath.Join(work, "apt")
	for _, d := range []string{"etc/sources.list.d", "etc/preferences.d", "lists/partial", "archives/partial", "dpkg"} {
		if err := os.MkdirAll(filepath.Join(apt, d), 0o755); err != nil {
			return "", "", err
		}
	}
	if err := os.WriteFile(filepath.Join(apt, "dpkg", "status"), nil, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(apt, "etc", "sources.list.d", "debian.sources"), []byte(nodeSources), 0o644); err != nil {
		return "", "", err
	}
	opts := []string{
		"-o", "Dir::Etc=" + apt + "/etc", "-o", "Dir::Etc::sourcelist=/dev/null",
		"-o", "Dir::Etc::sourceparts=" + apt + "/etc/sources.list.d",
		"-o", "Dir::Etc::preferencesparts=" + apt + "/etc/preferences.d",
		"-o", "Dir::Etc::Trusted=/dev/null", "-o", "Dir::Etc::TrustedParts=/dev/null",
		"-o", "Dir::State=" + apt, "-o", "Dir::State::Lists=" + apt + "/lists",
		"-o", "Dir::State::status=" + apt + "/dpkg/status",
		"-o", "Dir::Cache=" + apt, "-o", "Dir::Cache::archives=" + apt + "/archives",
		"-o", "APT::Architecture=" + arch, "-o", "APT::Architectures=" + arch,
		"-o", "Acquire::Languages=none", "-o", "APT::Install-Recommends=false",
		"-o", "APT::Install-Suggests=false", "-o", "Debug::NoLocking=1",
		"-o", "APT::Sandbox::User=root",
	}
	fmt.Fprintf(os.Stderr, "node runtime: resolving %s's nodejs for %s\n", nodeSuite, arch)
	if _, err := runTool(ctx, "", "apt-get", append(opts, "-qq", "update")...); err != nil {
		return "", "", err
	}
	if _, err := runTool(ctx, "", "apt-get", append(opts, "-qq", "-y", "--download-only", "install", "nodejs")...); err != nil {
		return "", "", err
	}
	debs, err := filepath.Glob(filepath.Join(apt, "archives", "*.deb"))
	if err != nil {
		return "", "", err
	}
	if len(debs) == 0 {
		return "", "", errors.New("node runtime: apt downloaded no packages")
	}
	rootfs = filepath.Join(work, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return "", "", err
	}
	var lines []string
	for _, deb := range debs {
		if _, err := runTool(ctx, "", "dpkg-deb", "-x", deb, rootfs); err != nil {
			return "", "", err
		}
		fields := make([]string, 0, 4)
		for _, f := range []string{"Package", "Version", "Architecture"} {
			v, err := runTool(ctx, "", "dpkg-deb", "-f", deb, f)
			if err != nil {
				return "", "", err
			}
			fields = append(fields, strings.TrimSpace(v))
		}
		sum, err := fileSHA256(deb)
		if err != nil {
			return "", "", err
		}
		lines = append(lines, strings.Join(append(fields, sum), "\t")+"\n")
	}
	slices.Sort(lines) // byte order, as LC_ALL=C sort
	return rootfs, strings.Join(lines, ""), nil
}

// fileSHA256 is the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// runTool runs an installed program (found on PATH, or a path) in dir (""
// for the current one) and returns its standard output; the end of its
// output is kept for the error.
func runTool(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// Some tools (tsc) write their diagnostics to standard output.
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, lastBytes(append(stdout.Bytes(), stderr.Bytes()...), 4096))
	}
	return stdout.String(), nil
}

// lastBytes is the end of b, at most n bytes of it.
func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
