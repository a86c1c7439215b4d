//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/mod/semver"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// restampedRelease builds the platform's images from this tree as a newer
// version (its patch number one higher, pre-release tag; the same programs,
// other digests), pushes them to the node's registry, and writes the
// release overlay pinning them with the admin's overlay on top, as
// installed but for the images. It returns the admin's overlay, the
// version and the images. The isolation gate stays the installed one: a
// new gate image would change every plugin's pod template.
func restampedRelease(t *testing.T, e *platformEnv, tag string) (string, string, map[string]plugins.ImageRef) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	next := e.src
	next.Version = newerPatch(t, e.src.Version, tag)
	specs, err := images.SelectSpecs("operator", "egress-proxy", "openfief-core")
	must(t, err)
	built, reused, err := images.Cached(ctx, filepath.Join(e.root, ".cache", "e2e-images"), images.Options{
		Source: next, Specs: specs, Platforms: []v1.Platform{images.HostPlatform()},
	})
	must(t, err)
	refs := map[string]plugins.ImageRef{}
	for _, b := range built.Images {
		ref, err := images.PushIndex(ctx, images.Repository(e.c.NodeRegistry(), b.Spec.Name), b.Index, images.PushOptions{})
		must(t, err)
		if ref == e.refs[b.Spec.Name] {
			t.Fatalf("%s as %s has the digest of %s: the upgrade would change nothing", b.Spec.Name, next.Version, e.src.Version)
		}
		refs[b.Spec.Name] = ref
	}
	refs[overlay.CheckProbe] = e.gate
	t.Logf("%s the platform's images as %s in %s", map[bool]string{true: "reused", false: "built"}[reused], next.Version, time.Since(start).Round(100*time.Millisecond))
	release := filepath.Join(e.work, "release-"+tag)
	must(t, overlay.WritePlatform(release, filepath.Join(e.root, "deploy"), overlay.Platform{
		Refs: refs, Version: next.Tag(), Header: "TestPlatformInCluster: this tree as a newer version.",
	}))
	site := filepath.Join(e.work, "site-"+tag)
	must(t, devstack.WriteDevOverlay(site, "../"+filepath.Base(release), devstack.DevOverlay{
		Components:         []string{filepath.Join(e.root, "deploy", "operator", "components", "registry-config")},
		InsecureRegistries: []string{e.preg.bridge, e.private.bridge},
		SyncInterval:       testSyncInterval,
		OperatorArgs:       siteOperatorArgs(t, e),
	}))
	return site, next.Tag(), refs
}

// newerPatch is a version newer than v as semantic versions order them:
// v's release with the patch number one higher, pre-release tag.
func newerPatch(t *testing.T, v, tag string) string {
	t.Helper()
	if !semver.IsValid(v) {
		t.Fatalf("the build's version %q is not a semantic version: cannot name a newer one", v)
	}
	parts := strings.Split(strings.TrimPrefix(strings.TrimSuffix(semver.Canonical(v), semver.Prerelease(v)), "v"), ".")
	patch, err := strconv.Atoi(parts[2])
	must(t, err)
	next := fmt.Sprintf("v%s.%s.%d-%s", parts[0], parts[1], patch+1, tag)
	if semver.Compare(next, v) <= 0 {
		t.Fatalf("%s is not newer than %s", next, v)
	}
	return next
}
