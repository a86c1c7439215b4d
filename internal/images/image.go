package images

import (
	"fmt"
	"maps"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// OCI annotation keys the images carry.
const (
	AnnotationCreated     = "org.opencontainers.image.created"
	AnnotationDescription = "org.opencontainers.image.description"
	AnnotationLicenses    = "org.opencontainers.image.licenses"
	AnnotationRevision    = "org.opencontainers.image.revision"
	AnnotationSource      = "org.opencontainers.image.source"
	AnnotationTitle       = "org.opencontainers.image.title"
	AnnotationVersion     = "org.opencontainers.image.version"
)

// Annotations are the OCI annotations of s's images and index built from src.
func Annotations(src Source, s Spec) map[string]string {
	return map[string]string{
		AnnotationCreated:     src.Epoch.Format(time.RFC3339),
		AnnotationDescription: s.Description,
		AnnotationLicenses:    s.Licenses,
		AnnotationRevision:    src.Commit,
		AnnotationSource:      SourceURL,
		AnnotationTitle:       s.Name,
		AnnotationVersion:     src.Version,
	}
}

// base is the layers every image of a build shares.
type base struct {
	users, ca v1.Layer
}

func newBase(epoch time.Time) (base, error) {
	users, err := usersLayer(epoch)
	if err != nil {
		return base{}, err
	}
	ca, err := caLayer(epoch)
	if err != nil {
		return base{}, err
	}
	return base{users: users, ca: ca}, nil
}

// newImage assembles s's image for p: the users layer, the CA layer if s
// makes TLS calls, and the binary at /<Name>, its entrypoint; user
// 65532:65532; every created time epoch; labels in the config and
// annotations on the manifest.
func newImage(p v1.Platform, s Spec, b base, binary []byte, epoch time.Time, labels, annotations map[string]string) (v1.Image, error) {
	bin, err := newLayer([]entry{file(s.Name, 0o755, binary)}, epoch)
	if err != nil {
		return nil, err
	}
	layers := []historyLayer{{b.users, usersHistory}}
	if s.CABundle {
		layers = append(layers, historyLayer{b.ca, caHistory})
	}
	layers = append(layers, historyLayer{bin, fmt.Sprintf("/%s (CGO_ENABLED=0 go build %s %s)", s.Name, strings.Join(GoFlags, " "), s.Package)})
	cfg := v1.Config{Entrypoint: []string{"/" + s.Name}, User: User, WorkingDir: "/", Labels: labels}
	return assemble(p, cfg, layers, epoch, annotations)
}

// What the base layers hold, as their history says.
const (
	usersHistory = "/etc/passwd, /etc/group (user 65532)"
	caHistory    = CABundlePath + " (golang.org/x/crypto/x509roots/fallback)"
)

// historyLayer is one layer of an image and what its history line says it
// holds.
type historyLayer struct {
	layer v1.Layer
	what  string
}

// assemble is p's image of layers, in order, under cfg: an OCI manifest
// and config, every created time epoch, each layer's history line
// "openfief images: <what>", and annotations on the manifest.
func assemble(p v1.Platform, cfg v1.Config, layers []historyLayer, epoch time.Time, annotations map[string]string) (v1.Image, error) {
	created := v1.Time{Time: epoch}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      created,
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l.layer, History: v1.History{Created: created, CreatedBy: "openfief images: " + l.what}}
	}
	if img, err = mutate.Append(img, adds...); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, annotations).(v1.Image), nil
}

// newIndex is an OCI image index of imgs, one per platform, in that order.
func newIndex(imgs []v1.Image, platforms []v1.Platform, annotations map[string]string) v1.ImageIndex {
	adds := make([]mutate.IndexAddendum, len(imgs))
	for i, img := range imgs {
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platforms[i]}}
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, annotations).(v1.ImageIndex)
}

// WithManifestLabel returns idx with the manifest label of each of its
// images set to label: the same program, layers and annotations under
// another signed manifest. The local mode's second demo version is nbp-fx
// asking for one more host this way.
func WithManifestLabel(idx v1.ImageIndex, label string) (v1.ImageIndex, error) {
	if _, err := plugins.ParseManifestLabel(label); err != nil {
		return nil, err
	}
	return mapImages(idx, func(img v1.Image) (v1.Image, error) {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Config.Labels = maps.Clone(cf.Config.Labels)
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		cf.Config.Labels[plugins.ManifestLabel] = label
		return mutate.ConfigFile(img, cf)
	})
}

// WithExtraCA returns idx with one more layer in each of its images: the
// PEM file caPEM as /etc/ssl/certs/NAME.pem, which Go's system roots read
// besides CABundlePath (every file of that folder). The local mode's demo
// plugin trusts the NBP stand-in's CA this way; its time is the epoch, so
// the same CA gives the same image.
func WithExtraCA(idx v1.ImageIndex, name string, caPEM []byte) (v1.ImageIndex, error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("images: CA file name %q must be a plain name", name)
	}
	layer, err := newLayer([]entry{
		dir("etc/"),
		dir("etc/ssl/"),
		dir("etc/ssl/certs/"),
		file("etc/ssl/certs/"+name+".pem", 0o644, caPEM),
	}, time.Unix(0, 0))
	if err != nil {
		return nil, err
	}
	return mapImages(idx, func(img v1.Image) (v1.Image, error) {
		return mutate.AppendLayers(img, layer)
	})
}

// mapImages returns an index of f applied to each image of idx, with the
// same platforms and annotations.
func mapImages(idx v1.ImageIndex, f func(v1.Image) (v1.Image, error)) (v1.ImageIndex, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	imgs := make([]v1.Image, len(im.Manifests))
	platforms := make([]v1.Platform, len(im.Manifests))
	for i, d := range im.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("image %s of the index names no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		if imgs[i], err = f(img); err != nil {
			return nil, err
		}
		platforms[i] = *d.Platform
	}
	return newIndex(imgs, platforms, im.Annotations), nil
}
