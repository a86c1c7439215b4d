//go:build heavy

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugininit"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The projects `openfief plugin init` writes, built as a vendor builds them
// against this tree's SDKs (--sdk) and run in the sandbox: each must pass
// the harness as written, its connector's delivery by the core's rules and
// its view's pages kept idempotently. The Go ones are built as their own
// modules (GOWORK=off, -mod=mod) into a static binary packed as
// pluginImage packs the first-party ones; the TypeScript ones are installed
// and built with npm as the skeleton's Dockerfile does (the SDK packed with
// npm pack, as its comment says), their /app assembled from the compiled
// dist/ and the production node_modules, on the Node.js runtime of the
// TypeScript example's image.

// skeletonConfig is the config every skeleton is run with: their settings
// have defaults.
const skeletonConfig = `{}`

// build memoizes one image built for the package's tests.
type build struct {
	once sync.Once
	img  v1.Image
	err  error
}

// get builds the image with fn once and returns it, failing t when the
// build failed.
func (b *build) get(t *testing.T, what string, fn func(ctx context.Context) (v1.Image, error)) v1.Image {
	t.Helper()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		began := time.Now()
		b.img, b.err = fn(ctx)
		t.Logf("built %s in %s", what, time.Since(began).Round(time.Millisecond))
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", what, b.err)
	}
	return b.img
}

var skeletonBuilds = map[plugininit.Lang]map[plugininit.Kind]*build{
	plugininit.Go:         {plugininit.Connector: {}, plugininit.View: {}},
	plugininit.TypeScript: {plugininit.Connector: {}, plugininit.View: {}},
}

// command runs name with args in dir, env added to this process's, and
// returns its standard output; its output is in the error.
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// writeSkeleton writes the project plugin init writes for lang and kind,
// on sdk, into a new temporary folder, and returns the folder and the
// project's manifest label.
func writeSkeleton(lang plugininit.Lang, kind plugininit.Kind, sdk string) (dir, label string, err error) {
	o := plugininit.Options{Name: "acme-" + string(kind), Lang: lang, Kind: kind, SDK: sdk}
	if err := o.Validate(); err != nil {
		return "", "", err
	}
	if dir, err = os.MkdirTemp("", "openfief-skeleton-"); err != nil {
		return "", "", err
	}
	if _, err := plugininit.Write(dir, o); err != nil {
		return "", "", err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return "", "", err
	}
	label, err = images.ManifestLabel(raw)
	return dir, label, err
}

// goSkeleton builds the Go project of kind: a static binary, built as its
// own module, packed with its manifest label.
func goSkeleton(t *testing.T, kind plugininit.Kind) v1.Image {
	return skeletonBuilds[plugininit.Go][kind].get(t, "the Go "+string(kind)+" skeleton", func(ctx context.Context) (v1.Image, error) {
		root, err := images.FindRoot(".")
		if err != nil {
			return nil, err
		}
		dir, label, err := writeSkeleton(plugininit.Go, kind, filepath.Join(root, "sdk", "go"))
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		env := []string{"GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"}
		if _, err := command(ctx, dir, env, "go", "build", "-trimpath", "-o", "plugin", "."); err != nil {
			return nil, err
		}
		bin, err := os.ReadFile(filepath.Join(dir, "plugin"))
		if err != nil {
			return nil, err
		}
		return packBinary("acme-"+string(kind), bin, label)
	})
}

var (
	tsSDKOnce sync.Once
	tsSDKDir  string
	tsSDKErr  error
)

// tsSDK builds sdk/ts into a temporary folder as npm pack would ship it
// (dist/, package.json, LICENSE, README.md), as the plugininit tests do,
// writing nothing under sdk/ts; sdk/ts's npm packages must be installed
// (make ts-deps).
func tsSDK(t *testing.T) string {
	t.Helper()
	tsSDKOnce.Do(func() {
		root, err := images.FindRoot(".")
		if err != nil {
			tsSDKErr = err
			return
		}
		if tsSDKErr = images.TSDepsInstalled(root); tsSDKErr != nil {
			return
		}
		src := filepath.Join(root, "sdk", "ts")
		if tsSDKDir, tsSDKErr = sharedDir("openfief-ts-sdk-"); tsSDKErr != nil {
			return
		}
		tsc := filepath.Join(src, "node_modules", ".bin", "tsc")
		if _, tsSDKErr = command(context.Background(), src, nil, tsc, "-p", "tsconfig.json", "--outDir", filepath.Join(tsSDKDir, "dist")); tsSDKErr != nil {
			return
		}
		for _, f := range []string{"package.json", "LICENSE", "README.md"} {
			var raw []byte
			if raw, tsSDKErr = os.ReadFile(filepath.Join(src, f)); tsSDKErr != nil {
				return
			}
			if tsSDKErr = os.WriteFile(filepath.Join(tsSDKDir, f), raw, 0o644); tsSDKErr != nil {
				return
			}
		}
	})
	if tsSDKErr != nil {
		t.Fatal(tsSDKErr)
	}
	return tsSDKDir
}

// tsSkeleton builds the TypeScript project of kind as its Dockerfile does
// (npm install, npm run build, npm prune --omit=dev), the SDK packed into
// the project first as the Dockerfile's comment says, and packs its /app
// (dist/'s modules, package.json, node_modules) on Debian's Node.js as
// internal/images packs the TypeScript example.
func tsSkeleton(t *testing.T, kind plugininit.Kind) v1.Image {
	sdk := tsSDK(t)
	src := tsSource(t)
	return skeletonBuilds[plugininit.TypeScript][kind].get(t, "the TypeScript "+string(kind)+" skeleton", func(ctx context.Context) (v1.Image, error) {
		dir, label, err := writeSkeleton(plugininit.TypeScript, kind, sdk)
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		packed, err := command(ctx, dir, nil, "npm", "pack", "--silent", sdk)
		if err != nil {
			return nil, err
		}
		tgz := "./" + strings.TrimSpace(packed)
		npm := [][]string{
			{"install", "--no-audit", "--no-fund", tgz},
			{"run", "build"},
			{"prune", "--omit=dev", "--no-audit", "--no-fund"},
		}
		for _, args := range npm {
			if _, err := command(ctx, dir, nil, "npm", args...); err != nil {
				return nil, err
			}
		}
		app := filepath.Join(dir, "image-app")
		if err := os.CopyFS(app, os.DirFS(filepath.Join(dir, "dist"))); err != nil {
			return nil, err
		}
		if err := os.CopyFS(filepath.Join(app, "node_modules"), os.DirFS(filepath.Join(dir, "node_modules"))); err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(app, "package.json"), raw, 0o644); err != nil {
			return nil, err
		}
		manifest, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			return nil, err
		}
		arch := images.HostPlatform().Architecture
		runtime, err := images.NodeRuntime(ctx, arch)
		if err != nil {
			return nil, err
		}
		idx, err := images.NodePluginIndex(src, images.NodePlugin{
			Name: "acme-" + string(kind), Description: "plugin init's TypeScript " + string(kind), Licenses: "0BSD",
			ManifestJSON: manifest, Runtimes: map[string]string{arch: runtime}, App: app,
		})
		if err != nil {
			return nil, err
		}
		img, err := indexImage(idx, arch)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if got := cf.Config.Labels[plugins.ManifestLabel]; got != label {
			return nil, fmt.Errorf("the image's label %q is not plugin label's %q", got, label)
		}
		return img, nil
	})
}

// TestSkeletonsPass runs the plugins plugin init writes, in Go and in
// TypeScript, in the sandbox: no check fails; a connector's Sync delivery
// passes the core's rules, a view keeps the same page twice.
func TestSkeletonsPass(t *testing.T) {
	needSandbox(t)
	for _, lang := range []plugininit.Lang{plugininit.Go, plugininit.TypeScript} {
		for _, kind := range []plugininit.Kind{plugininit.Connector, plugininit.View} {
			t.Run(string(lang)+"/"+string(kind), func(t *testing.T) {
				var img v1.Image
				if lang == plugininit.Go {
					img = goSkeleton(t, kind)
				} else {
					img = tsSkeleton(t, kind)
				}
				must := []string{CheckServes, CheckAuth, CheckEgress, CheckNetwork, CheckSigterm, CheckResources}
				if kind == plugininit.Connector {
					must = append(must, CheckSync)
				} else {
					must = append(must, CheckPages)
				}
				rep := runPlugin(t, NewRuntime, img, string(lang)+"-"+string(kind), skeletonConfig)
				wantPass(t, rep, must...)
			})
		}
	}
}
