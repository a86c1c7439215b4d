package ocisign

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// PluginImage builds a small, reproducible OCI image for a plugin: one layer
// holding the given files, the numeric non-root user 65532:65532 the
// restricted Pod Security Standard needs, and the manifest as the
// io.openfief.plugin.manifest label. The same input gives the same digest.
func PluginImage(m plugins.Manifest, files map[string][]byte) (v1.Image, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("plugin manifest: %w", err)
	}
	label, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return filesImage(files, "amd64", "65532:65532", "/plugin", map[string]string{plugins.ManifestLabel: string(label)})
}

// filesImage is an image of one layer holding files (filesLayer) for
// linux/arch, run as user with entrypoint and labels.
func filesImage(files map[string][]byte, arch, user, entrypoint string, labels map[string]string) (v1.Image, error) {
	layer, err := filesLayer(files)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Config.User = user
	cf.Config.Labels = labels
	cf.Config.Entrypoint = []string{entrypoint}
	return mutate.ConfigFile(img, cf)
}

// filesLayer packs files into a tar layer with fixed metadata, sorted.
func filesLayer(files map[string][]byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Name: p, Mode: 0o555, Size: int64(len(files[p])), ModTime: time.Unix(0, 0).UTC(), Uid: 0, Gid: 0}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// Push writes img to registry/repo by digest and returns its reference,
// with the credentials of the Docker config where the registry needs them,
// as Sign does. Plain HTTP is used only for loopback registries.
func Push(ctx context.Context, registry, repo string, img v1.Image) (plugins.ImageRef, error) {
	d, err := img.Digest()
	if err != nil {
		return plugins.ImageRef{}, err
	}
	ref, err := plugins.ParseImageRef(registry + "/" + repo + "@" + d.String())
	if err != nil {
		return plugins.ImageRef{}, err
	}
	dr, err := digestRef(ref)
	if err != nil {
		return plugins.ImageRef{}, err
	}
	if err := remote.Write(dr, img, remoteOptions(ctx)...); err != nil {
		return plugins.ImageRef{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return ref, nil
}

// digestRef converts a domain ImageRef for go-containerregistry, allowing
// plain HTTP only for a loopback registry.
func digestRef(ref plugins.ImageRef) (name.Digest, error) {
	var opts []name.Option
	if isLoopback(ref.Registry()) {
		opts = append(opts, name.Insecure)
	}
	return name.NewDigest(ref.String(), opts...)
}

// isLoopback reports whether a registry host[:port] is on this machine.
func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// BinaryImage builds a small, reproducible OCI image that runs one static
// binary: a single layer holding it at /name, that path as the entrypoint,
// and user as the image's user (a numeric "uid:gid"). The local real node
// wraps its own sandbox (pause) process and the tests' probes with it.
func BinaryImage(name string, binary []byte, user string) (v1.Image, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("binary image: name %q must be one path element", name)
	}
	return filesImage(map[string][]byte{name: binary}, runtime.GOARCH, user, "/"+name, nil)
}
