//go:build cluster

package incluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// releaseACommit is the earlier commit the upgrade-release phase makes
// release A from, with that commit's own release tooling. Since it, the
// tree changed what an installed platform is made of: the core's Deployment
// (a metrics port and its flag), the core's and the operator's
// NetworkPolicies, the deploy/monitoring component, the core's backup and
// restore API and its backup before a migration. Its plugins' pod template
// is the tree's, so an upgrade from it should restart no plugin.
const releaseACommit = "7988aef8f21fb3bf82d9340dbc3a82ad0e2951d5"

// releaseAVersion is release A's version: older than releaseVersion, the
// tree's release, as semantic versions order them.
const releaseAVersion = "v0.98.0-e2e.1"

// releaseAImages are the images of release A an install runs.
var releaseAImages = []string{"operator", "egress-proxy", "openfief-core", overlay.CheckProbe}

// releaseA is release A as this run's registry serves it.
type releaseA struct {
	// dir is an overlay of release A's install.yaml naming this run's
	// registry; cli is release A's own openfief binary.
	dir, cli string
	refs     map[string]plugins.ImageRef
}

// makeReleaseA makes release A, or reuses it: the commit is checked out
// beside the tree in the per-user cache (~/.cache/openfief/release-a/
// <commit>/src, a detached git worktree) and released there by its own
// `go run ./hack/release make`, pushed to a registry of this process's and
// signed with a key of the cache's; the release's files and its images (an
// OCI layout) stay in the cache, keyed by the commit, so later runs build
// nothing. Each run pushes the images into the node's plugin registry under
// the repositories the tree's release uses (releaseRepoPath), as a
// project's releases share their repositories, and writes an overlay of the release's install.yaml naming them
// there (the digests are the release's). It fails the test when A cannot be
// made: the phase is about a real earlier release.
func makeReleaseA(t *testing.T, e *platformEnv) *releaseA {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	cache, prefix := releaseACache(t, e.root)

	// Its images into this run's registry, by the release's digests.
	l, err := layout.FromPath(filepath.Join(cache, "images"))
	must(t, err)
	idx, err := l.ImageIndex()
	must(t, err)
	m, err := idx.IndexManifest()
	must(t, err)
	a := &releaseA{dir: filepath.Join(e.work, "release-a"), cli: filepath.Join(cache, "release", "openfief-"+images.HostPlatform().OS+"-"+images.HostPlatform().Architecture), refs: map[string]plugins.ImageRef{}}
	for _, d := range m.Manifests {
		n := d.Annotations[layoutNameAnnotation]
		sub, err := idx.ImageIndex(d.Digest)
		must(t, err)
		dst, err := name.NewDigest(e.preg.loopback+"/"+releaseRepoPath+"/openfief/"+n+"@"+d.Digest.String(), name.Insecure)
		must(t, err)
		must(t, remote.WriteIndex(dst, sub, remote.WithContext(ctx)))
		ref, err := plugins.ParseImageRef(e.preg.bridge + "/" + releaseRepoPath + "/openfief/" + n + "@" + d.Digest.String())
		must(t, err)
		a.refs[n] = ref
	}
	for _, n := range releaseAImages {
		if a.refs[n].Digest() == "" {
			t.Fatalf("the cache of release A holds no %s image: remove %s to make it again", n, cache)
		}
	}
	// The release's own overlay (its kustomization over install.yaml),
	// naming this run's registry where the release named the maker's.
	must(t, os.MkdirAll(a.dir, 0o755))
	for _, f := range []string{"kustomization.yaml", "install.yaml"} {
		raw, err := os.ReadFile(filepath.Join(cache, "release", f))
		must(t, err)
		text := strings.ReplaceAll(string(raw), prefix+"/", e.preg.bridge+"/"+releaseRepoPath+"/")
		must(t, os.WriteFile(filepath.Join(a.dir, f), []byte(text), 0o644))
	}
	if _, err := os.Stat(a.cli); err != nil {
		t.Fatalf("release A's openfief: %v", err)
	}
	t.Logf("release A in the node's registry in %s: %v", time.Since(start).Round(100*time.Millisecond), a.refs)
	return a
}

// releaseACache returns the cache of release A and the registry prefix its
// files name, making it first when it is not there (buildReleaseA). It
// fails the test when A cannot be made.
func releaseACache(t *testing.T, root string) (cache, prefix string) {
	t.Helper()
	base, err := os.UserCacheDir()
	must(t, err)
	cache = filepath.Join(base, "openfief", "release-a", releaseACommit)
	must(t, os.MkdirAll(cache, 0o755))
	// One maker at a time: two test processes may want it at once.
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	defer func() { _ = lock.Close() }()
	must(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	if made, err := os.ReadFile(filepath.Join(cache, "made")); err == nil {
		t.Logf("release A %s of commit %s reused from %s", releaseAVersion, releaseACommit[:12], cache)
		return cache, strings.TrimSpace(string(made))
	}
	start := time.Now()
	prefix, err = buildReleaseA(context.Background(), t, root, cache)
	if err != nil {
		t.Fatalf("release A (commit %s) could not be made by its own tooling: %v", releaseACommit, err)
	}
	t.Logf("release A %s made from commit %s in %s (cached in %s)", releaseAVersion, releaseACommit[:12], time.Since(start).Round(100*time.Millisecond), cache)
	return cache, prefix
}

// TestReleaseA makes release A, or finds it in the cache, without a node:
// its four images and its CLI are there. The upgrade-release phase of
// TestPlatformInCluster installs it.
func TestReleaseA(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an earlier commit's release: not in -short")
	}
	root, err := images.FindRoot(".")
	must(t, err)
	cache, prefix := releaseACache(t, root)
	l, err := layout.FromPath(filepath.Join(cache, "images"))
	must(t, err)
	idx, err := l.ImageIndex()
	must(t, err)
	m, err := idx.IndexManifest()
	must(t, err)
	var names []string
	for _, d := range m.Manifests {
		names = append(names, d.Annotations[layoutNameAnnotation])
	}
	for _, n := range releaseAImages {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") {
			t.Errorf("the cache of release A holds %v, not %s", names, n)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "release", "openfief-"+images.HostPlatform().OS+"-"+images.HostPlatform().Architecture)); err != nil {
		t.Errorf("release A's CLI: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(cache, "release", "install.yaml"))
	must(t, err)
	if !strings.Contains(string(raw), prefix+"/openfief/openfief-core@sha256:") {
		t.Errorf("release A's install.yaml does not name its core under %s", prefix)
	}
}

// layoutNameAnnotation names each image in the cache's OCI layout.
const layoutNameAnnotation = "org.opencontainers.image.ref.name"

// buildReleaseA checks the commit out into cache/src (unless it is there),
// runs its `go run ./hack/release make` into cache/release against a
// registry this process serves on loopback, copies the release's images
// from it into cache/images, and writes cache/made (the registry prefix
// the release's files name) last. It returns that prefix.
func buildReleaseA(ctx context.Context, t *testing.T, root, cache string) (string, error) {
	src := filepath.Join(cache, "src")
	// A checkout of the commit, by a git that still knows it: a worktree
	// added by a clone since removed is made again.
	head, err := exec.CommandContext(ctx, "git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil || strings.TrimSpace(string(head)) != releaseACommit {
		_ = os.RemoveAll(src)
		// A worktree left registered by a cache that was removed.
		_ = exec.CommandContext(ctx, "git", "-C", root, "worktree", "prune").Run()
		out, err := exec.CommandContext(ctx, "git", "-C", root, "worktree", "add", "--detach", src, releaseACommit).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git worktree add --detach %s %s: %w\n%s", src, releaseACommit, err, out)
		}
	}
	for _, d := range []string{"release", "images"} {
		if err := os.RemoveAll(filepath.Join(cache, d)); err != nil {
			return "", err
		}
	}
	key := filepath.Join(cache, "release-a.key")
	if err := writeECKey(key); err != nil {
		return "", err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	prefix := ln.Addr().String() + "/rel-a"

	mctx, cancel := context.WithTimeout(ctx, 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(mctx, "go", "run", "./hack/release", "make",
		"--version", releaseAVersion, "--registry", prefix, "--key", key, "--publisher", "openfief-e2e-release-a",
		"--platform", images.HostPlatform().OS+"/"+images.HostPlatform().Architecture, "--out", filepath.Join(cache, "release"))
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-trimpath -ldflags=-w", "VERSION=")
	cmd.Stdout, cmd.Stderr = testLogWriter{t}, testLogWriter{t}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go run ./hack/release make in %s: %w", src, err)
	}

	var listed struct {
		Images []struct{ Name, Ref string } `json:"images"`
	}
	raw, err := os.ReadFile(filepath.Join(cache, "release", "images.json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(raw, &listed); err != nil {
		return "", fmt.Errorf("release A's images.json: %w", err)
	}
	l, err := layout.Write(filepath.Join(cache, "images"), empty.Index)
	if err != nil {
		return "", err
	}
	kept := 0
	for _, im := range listed.Images {
		if !slices.Contains(releaseAImages, im.Name) {
			continue
		}
		ref, err := name.NewDigest(im.Ref, name.Insecure)
		if err != nil {
			return "", fmt.Errorf("release A's image %s: %w", im.Name, err)
		}
		idx, err := remote.Index(ref, remote.WithContext(ctx))
		if err != nil {
			return "", fmt.Errorf("release A's image %s: %w", im.Name, err)
		}
		if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{layoutNameAnnotation: im.Name})); err != nil {
			return "", err
		}
		kept++
	}
	if kept != len(releaseAImages) {
		return "", fmt.Errorf("release A's images.json names %d of the images %v", kept, releaseAImages)
	}
	if err := os.WriteFile(filepath.Join(cache, "made"), []byte(prefix+"\n"), 0o644); err != nil {
		return "", err
	}
	return prefix, nil
}

// writeECKey writes a new ECDSA P-256 private key (PKCS#8 PEM) to file, the
// key release A is signed with.
func writeECKey(file string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
