package images

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

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

// file is a regular file or directory of the flattened image.
type tarFile struct {
	hdr  *tar.Header
	data []byte
}

// extract flattens img and checks every entry's metadata: owned by 0:0
// without names, modified at epoch.
func extract(t *testing.T, img v1.Image, epoch time.Time) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]tarFile{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		files[name] = tarFile{hdr: hdr, data: data}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s owned by %d:%d (%q:%q), want 0:0", name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		if !hdr.ModTime.Equal(epoch) {
			t.Errorf("%s modified %s, want %s", name, hdr.ModTime, epoch)
		}
	}
	return files
}
