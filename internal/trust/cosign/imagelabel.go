package cosign

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// MaxLabelImages caps how many platform images of an index ReadLabel reads.
const MaxLabelImages = 16

// maxImageName bounds the image reference ReadLabel parses.
const maxImageName = 1024

// ImageLabel is one image's value of a config label.
type ImageLabel struct {
	// Platform is "os/arch" (and "/variant") for an image of an index, ""
	// for an image named directly.
	Platform string
	// Digest is the image manifest's digest.
	Digest string
	// Value is the label's value; Found is false when the config has no
	// such label.
	Value string
	Found bool
}

// ReadLabel reads the label key from the config of the image that image
// names, by tag or by digest, through the same transport as Verify: plain
// HTTP only to loopback or insecure registries, every answer capped at
// MaxResponseBytes, redirects only to public HTTPS hosts, the credentials
// of WithKeychain, the call bounded by the verifier's timeout. No signature
// is checked: a vendor runs it on an image before signing it. For an image
// index it reads every platform image (buildx's attestation manifests left
// out), up to MaxLabelImages, in the index's order, and returns the digest
// the reference resolved to. Registry failures are *RegistryError; a
// reference or image that cannot be read as one wraps plugins.ErrInvalidImage.
func (v *Verifier) ReadLabel(ctx context.Context, image, key string) (string, []ImageLabel, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	ref, err := v.parseReference(image)
	if err != nil {
		return "", nil, err
	}
	p, err := remote.NewPuller(append([]remote.Option{remote.WithTransport(v.transport)}, v.remote...)...)
	if err != nil {
		return "", nil, err
	}
	desc, err := p.Get(ctx, ref)
	if err != nil {
		return "", nil, imageReadError("read manifest of", ref.String(), err)
	}
	switch {
	case desc.MediaType.IsImage():
		img, err := desc.Image()
		if err != nil {
			return "", nil, imageReadError("read image", ref.String(), err)
		}
		l, err := imageLabel(img, ref.String(), key)
		if err != nil {
			return "", nil, err
		}
		l.Digest = desc.Digest.String()
		return ref.Context().Digest(desc.Digest.String()).String(), []ImageLabel{l}, nil
	case desc.MediaType.IsIndex():
		labels, err := indexLabels(desc, ref, key)
		return ref.Context().Digest(desc.Digest.String()).String(), labels, err
	default:
		return "", nil, fmt.Errorf("%w: %s is a %s, not an image", plugins.ErrInvalidImage, ref, desc.MediaType)
	}
}

// parseReference names image, over plain HTTP for a loopback or insecure
// registry.
func (v *Verifier) parseReference(image string) (name.Reference, error) {
	if len(image) > maxImageName {
		return nil, fmt.Errorf("%w: a reference longer than %d bytes", plugins.ErrInvalidImage, maxImageName)
	}
	ref, err := name.ParseReference(image, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plugins.ErrInvalidImage, err)
	}
	if reg := ref.Context().RegistryStr(); v.insecure[reg] || isLoopback(reg) {
		return name.ParseReference(image, name.StrictValidation, name.Insecure)
	}
	return ref, nil
}

// indexLabels reads key from every platform image of the index desc holds.
func indexLabels(desc *remote.Descriptor, ref name.Reference, key string) ([]ImageLabel, error) {
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, imageReadError("read image index", ref.String(), err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, imageReadError("read image index", ref.String(), err)
	}
	var out []ImageLabel
	for _, m := range im.Manifests {
		if !m.MediaType.IsImage() || m.Platform != nil && m.Platform.OS == "unknown" {
			continue
		}
		if len(out) == MaxLabelImages {
			return nil, fmt.Errorf("%w: image index %s holds more than %d platform images", plugins.ErrInvalidImage, ref, MaxLabelImages)
		}
		child := ref.Context().Digest(m.Digest.String()).String()
		img, err := idx.Image(m.Digest)
		if err != nil {
			return nil, imageReadError("read platform image", child, err)
		}
		l, err := imageLabel(img, child, key)
		if err != nil {
			return nil, err
		}
		l.Digest, l.Platform = m.Digest.String(), platformString(m.Platform)
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: image index %s holds no platform image", plugins.ErrInvalidImage, ref)
	}
	return out, nil
}

// imageLabel reads key from img's config.
func imageLabel(img v1.Image, ref, key string) (ImageLabel, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return ImageLabel{}, imageReadError("read image config of", ref, err)
	}
	value, found := cf.Config.Labels[key]
	return ImageLabel{Value: value, Found: found}, nil
}

// platformString writes p as os/arch[/variant], "unknown" when the index
// names none.
func platformString(p *v1.Platform) string {
	if p == nil {
		return "unknown"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}
