package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// layeredImage is a real two-layer image: the upper layer whites out a
// file and makes a folder opaque.
func layeredImage(t *testing.T) v1.Image {
	t.Helper()
	var layers []v1.Layer
	for _, data := range [][]byte{
		mkTar(t,
			entry{name: "etc/secret", typ: tar.TypeReg, data: "lower"},
			entry{name: "bin/tool", typ: tar.TypeReg, mode: 0o4755, data: "#!/bin/tool"},
			entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
			entry{name: "opaque/", typ: tar.TypeDir, mode: 0o755},
			entry{name: "opaque/old", typ: tar.TypeReg, data: "old"},
			entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		),
		mkTar(t,
			entry{name: "etc/.wh.secret", typ: tar.TypeReg},
			entry{name: "opaque/.wh..wh..opq", typ: tar.TypeReg},
			entry{name: "opaque/new", typ: tar.TypeReg, data: "new"},
			entry{name: "bin/tool", typ: tar.TypeReg, mode: 0o2755, data: "#!/bin/tool v2"},
			entry{name: "bin/tool2", typ: tar.TypeLink, link: "bin/tool"},
		),
	} {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{
		Entrypoint: []string{"/bin/tool"}, Cmd: []string{"serve"}, Env: []string{"PATH=/bin"},
		WorkingDir: "/work", User: "65532:65532", Labels: map[string]string{"io.openfief.plugin.manifest": "{}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestUnpack(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Unpack(t.Context(), layeredImage(t), dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Entrypoint[0] != "/bin/tool" || cfg.Cmd[0] != "serve" || cfg.Env[0] != "PATH=/bin" || cfg.WorkingDir != "/work" ||
		cfg.User != "65532:65532" || cfg.Labels["io.openfief.plugin.manifest"] != "{}" {
		t.Errorf("config %+v", cfg)
	}
	for p, want := range map[string]string{"opaque/new": "new", "bin/tool": "#!/bin/tool v2", "bin/tool2": "#!/bin/tool v2"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"etc/secret", "opaque/old", "dev/null"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it absent", p, err)
		}
	}
	for p, want := range map[string]fs.FileMode{"": fs.ModeDir | 0o755, "bin/tool": 0o755, "tmp": fs.ModeDir | fs.ModeSticky | 0o777} {
		if st, err := os.Lstat(filepath.Join(dir, p)); err != nil || st.Mode() != want {
			t.Errorf("%q: %v, %v; want mode %v", p, st, err, want)
		}
	}

	// A folder that is not empty is refused; so are files past maxBytes.
	if _, err := Unpack(t.Context(), layeredImage(t), dir, 1<<20); err == nil {
		t.Error("Unpack into a folder that is not empty succeeded")
	}
	if _, err := Unpack(t.Context(), layeredImage(t), t.TempDir(), 10); !errors.Is(err, ErrTooBig) {
		t.Errorf("Unpack past maxBytes: %v, want ErrTooBig", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Unpack(ctx, layeredImage(t), t.TempDir(), 1<<20); !errors.Is(err, context.Canceled) {
		t.Errorf("Unpack with a canceled context: %v", err)
	}
}
