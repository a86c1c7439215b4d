package cosign

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Media types cosign v3 writes for a bundle referrer: an OCI image manifest
// whose one layer is the bundle, with the bundle type as artifactType.
const (
	bundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	ociEmptyMediaType     = "application/vnd.oci.empty.v1+json"
)

// fetchedBundle is one bundle blob and the referrer manifest that carried it.
type fetchedBundle struct {
	referrer string
	raw      []byte
}

// listBundles reads the Sigstore bundles attached to d. go-containerregistry
// asks the Referrers API first and reads the sha256-<hex> tag where the
// registry lacks it (a missing tag is an empty list). No artifactType filter
// is sent: registries disagree on what they report there (some report the
// config media type), so every referrer is listed and a bundle is
// recognised by its manifest, as cosign does: exactly one layer of a
// Sigstore bundle media type.
//
// A referrer whose manifest or blob is missing, malformed, over the size cap
// or not matching its digest is skipped and reported; a registry that
// cannot be reached or refuses a read fails the whole call.
func listBundles(ctx context.Context, p *remote.Puller, d name.Digest) ([]fetchedBundle, Report, error) {
	var rep Report
	idx, err := remote.Referrers(d, remote.Reuse(p), remote.WithContext(ctx))
	if err != nil {
		return nil, rep, registryError("list referrers of", d.String(), err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, rep, registryError("read referrers of", d.String(), err)
	}
	rep.Referrers = len(im.Manifests)

	var found []fetchedBundle
	read := 0
	for _, desc := range im.Manifests {
		if desc.ArtifactType == legacySignatureArtifactType {
			rep.LegacySignature = true
		}
		if !maybeBundle(desc) {
			rep.Ignored++
			continue
		}
		if read == MaxReferrers {
			rep.Skipped = append(rep.Skipped, Skipped{Referrer: desc.Digest.String(), Reason: fmt.Errorf("%w: only the first %d are read", ErrTooManyReferrers, MaxReferrers)})
			continue
		}
		read++
		raw, isBundle, err := fetchBundle(ctx, p, d.Context().Digest(desc.Digest.String()), desc)
		switch {
		case err != nil && transient(err):
			return nil, rep, registryError("read referrer", desc.Digest.String(), err)
		case err != nil:
			rep.Skipped = append(rep.Skipped, Skipped{Referrer: desc.Digest.String(), Reason: fmt.Errorf("%w: %w", ErrMalformedBundle, quiet(err))})
		case !isBundle:
			rep.Ignored++
		default:
			found = append(found, fetchedBundle{referrer: desc.Digest.String(), raw: raw})
		}
	}
	return found, rep, nil
}

// maybeBundle passes over referrers that cannot be bundles without fetching
// them: anything but an image manifest, and manifests whose artifactType
// names another kind of artifact.
func maybeBundle(desc v1.Descriptor) bool {
	if !desc.MediaType.IsImage() {
		return false
	}
	at := desc.ArtifactType
	return at == "" || at == ociEmptyMediaType || strings.HasPrefix(at, bundleMediaTypePrefix)
}

// fetchBundle reads one referrer manifest by digest and, when it has the
// shape of a bundle referrer, its bundle blob. go-containerregistry checks
// the manifest's and the blob's digests. isBundle is false for another kind
// of artifact.
func fetchBundle(ctx context.Context, p *remote.Puller, ref name.Digest, desc v1.Descriptor) (raw []byte, isBundle bool, err error) {
	if desc.Size > MaxResponseBytes {
		return nil, true, fmt.Errorf("manifest of %d bytes is over the %d-byte cap", desc.Size, MaxResponseBytes)
	}
	rd, err := p.Get(ctx, ref)
	if err != nil {
		return nil, true, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(rd.Manifest))
	if err != nil {
		return nil, true, fmt.Errorf("parse referrer manifest: %w", err)
	}
	if len(m.Layers) != 1 || !strings.HasPrefix(string(m.Layers[0].MediaType), bundleMediaTypePrefix) {
		return nil, false, nil
	}
	layer := m.Layers[0]
	if layer.Size > MaxBundleBytes {
		return nil, true, fmt.Errorf("bundle of %d bytes is over the %d-byte cap", layer.Size, MaxBundleBytes)
	}
	l, err := p.Layer(ctx, ref.Context().Digest(layer.Digest.String()))
	if err != nil {
		return nil, true, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, true, err
	}
	defer rc.Close()
	raw, err = io.ReadAll(io.LimitReader(rc, MaxBundleBytes+1))
	if err != nil {
		return nil, true, err
	}
	if len(raw) > MaxBundleBytes {
		return nil, true, fmt.Errorf("bundle is over the %d-byte cap", MaxBundleBytes)
	}
	return raw, true, nil
}
