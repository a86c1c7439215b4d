package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
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

func testSource(t *testing.T) Source {
	t.Helper()
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	src, err := ReadSource(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// testWriter logs progress lines.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newRegistry serves an in-process registry with the Referrers API and
// returns its host:port.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
