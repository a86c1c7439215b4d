//go:build heavy

package images

import (
	"context"
	"runtime"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The tests build the host's platform only (linux/amd64 here), so `make
// test` stays bounded; `make images` builds linux/arm64 too. The Go build
// cache makes every build after the first a link and a compression.

// testPlatform is the platform the tests build: the host's, so the binaries
// run here.
func testPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

var (
	shared     *Result
	sharedErr  error
	sharedOnce sync.Once
)

// sharedBuild is one build of every image for testPlatform, from this
// source tree, shared by the tests that only read it.
func sharedBuild(t *testing.T) *Result {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = build(context.Background(), t) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// build builds every image for testPlatform from this source tree.
func build(ctx context.Context, t *testing.T) (*Result, error) {
	src := testSource(t)
	return Build(ctx, Options{Source: src, Platforms: []v1.Platform{testPlatform()}, Progress: testWriter{t}})
}
