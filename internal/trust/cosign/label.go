package cosign

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// readManifestLabel reads the io.openfief.plugin.manifest label of the image
// d names, through the digest whose signature verified (D-42):
// go-containerregistry checks the manifest against d and the config blob
// against the manifest, so the label is covered by the signature. For an
// image index it reads the linux/amd64 image, or the index's only image
// (buildx's attestation manifests, platform unknown/unknown, do not count);
// the index digest covers its images' digests. A missing label is a nil
// manifest; one that does not parse wraps plugins.ErrInvalidLabel.
func readManifestLabel(ctx context.Context, p *remote.Puller, d name.Digest) (*plugins.Manifest, error) {
	img, err := signedImage(ctx, p, d)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, imageReadError("read image config of", d.String(), err)
	}
	label, ok := cf.Config.Labels[plugins.ManifestLabel]
	if !ok {
		return nil, nil
	}
	m, err := plugins.ParseManifestLabel(label)
	if err != nil {
		if !errors.Is(err, plugins.ErrInvalidLabel) {
			err = fmt.Errorf("%w: %w", plugins.ErrInvalidLabel, err)
		}
		return nil, fmt.Errorf("image %s: %w", d, err)
	}
	return &m, nil
}

// signedImage returns the image whose config carries the label: d itself,
// or the chosen image of the index d names.
func signedImage(ctx context.Context, p *remote.Puller, d name.Digest) (v1.Image, error) {
	desc, err := p.Get(ctx, d)
	if err != nil {
		return nil, imageReadError("read manifest of", d.String(), err)
	}
	switch {
	case desc.MediaType.IsImage():
		img, err := desc.Image()
		if err != nil {
			return nil, imageReadError("read image", d.String(), err)
		}
		return img, nil
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, imageReadError("read image index", d.String(), err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, imageReadError("read image index", d.String(), err)
		}
		child, err := choosePlatform(im.Manifests)
		if err != nil {
			return nil, fmt.Errorf("image index %s: %w", d, err)
		}
		img, err := idx.Image(child.Digest)
		if err != nil {
			return nil, imageReadError("read platform image", d.Context().Digest(child.Digest.String()).String(), err)
		}
		return img, nil
	default:
		return nil, fmt.Errorf("%w: %s is a %s, not an image", plugins.ErrInvalidImage, d, desc.MediaType)
	}
}

// choosePlatform picks linux/amd64 (without a variant, or the first one
// listed) or else the only platform image, ignoring attestation manifests.
func choosePlatform(manifests []v1.Descriptor) (v1.Descriptor, error) {
	var images []v1.Descriptor
	for _, m := range manifests {
		if !m.MediaType.IsImage() {
			continue
		}
		if m.Platform != nil && m.Platform.OS == "unknown" {
			continue // buildx attestation manifest
		}
		images = append(images, m)
	}
	for _, m := range images {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == "amd64" {
			return m, nil
		}
	}
	if len(images) == 1 {
		return images[0], nil
	}
	return v1.Descriptor{}, ErrNoPlatform
}

// imageReadError classifies a failed read of the signed image: the
// registry's fault (unreachable, refusing, failing) is a RegistryError;
// anything else, such as a missing manifest or one that does not match its
// digest, makes the image invalid.
func imageReadError(op, ref string, err error) error {
	if transient(err) {
		return registryError(op, ref, err)
	}
	return fmt.Errorf("%w: %s %s: %w", plugins.ErrInvalidImage, op, ref, quiet(err))
}
