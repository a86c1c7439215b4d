package images

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	// name is the path in the image without the leading slash; a trailing
	// slash makes it a directory.
	name string
	mode int64
	data []byte
	// link, when set, makes the entry a symbolic link to it.
	link string
}

// dir and file build entries.
func dir(name string) entry { return entry{name: name, mode: 0o755} }
func file(name string, mode int64, data []byte) entry {
	return entry{name: name, mode: mode, data: data}
}
func symlink(name, to string) entry { return entry{name: name, mode: 0o777, link: to} }

// newLayer packs entries into a gzip-compressed OCI layer that depends on
// nothing but its arguments: entries sorted by name, owned by 0:0 with no
// user or group names, the given modes, every time set to mtime, in the
// USTAR format; the gzip stream (level 6: level 9 takes three times as
// long for 1% less) has no name or time. The compression is
// done once, here, so writing and pushing the layer never recompress it.
func newLayer(entries []entry, mtime time.Time) (v1.Layer, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.name, b.name) })
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		switch {
		case strings.HasSuffix(e.name, "/"):
			hdr.Typeflag = tar.TypeDir
		case e.link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		default:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var zipped bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zipped, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarred.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	data := zipped.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
