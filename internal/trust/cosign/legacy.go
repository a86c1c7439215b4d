package cosign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// What cosign's legacy signature format looks like in a registry. `cosign
// sign --new-bundle-format=false` pushes an image manifest under the tag
// sha256-<hex>.sig whose layers are simple-signing payloads, the signature
// in a layer annotation; with its experimental OCI 1.1 mode it attaches the
// same manifest as a referrer of the artifact type below. Neither is a
// Sigstore bundle, so neither is verified (only bundles are, D-56): the
// verifier only notices one to say how to sign again.
const (
	legacySignatureTagSuffix    = ".sig"
	legacySignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"
	simpleSigningMediaType      = "application/vnd.dev.cosign.simplesigning.v1+json"
	// legacyReadTimeout bounds the read of the legacy tag, within Verify's
	// own timeout.
	legacyReadTimeout = 10 * time.Second
)

// errLegacyRedirect refuses a redirect while looking for a legacy signature:
// that read only feeds a hint, so it goes nowhere but the registry asked.
var errLegacyRedirect = errors.New("refusing a redirect while looking for a legacy signature")

// noRedirectKey marks a request's context: the transport refuses to follow
// a redirect for it.
type noRedirectKey struct{}

// legacySignatureTag is the tag cosign's legacy format uses for d:
// sha256-<hex>.sig in d's repository.
func legacySignatureTag(d name.Digest) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + legacySignatureTagSuffix)
}

// hasLegacySignature reports whether d carries a signature in cosign's
// legacy format under its sha256-<hex>.sig tag. It reads that one manifest
// with one GET, through the verifier's transport (so under its response cap)
// and without following a redirect, and recognises it by its layers. Any
// failure to read it (no such tag, an unreachable or refusing registry, a
// body over the cap) is "no": the answer only adds a hint to a refusal that
// stands either way, so a registry error here changes no verdict.
func hasLegacySignature(ctx context.Context, p *remote.Puller, d name.Digest) bool {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, noRedirectKey{}, true), legacyReadTimeout)
	defer cancel()
	rd, err := p.Get(ctx, legacySignatureTag(d))
	if err != nil {
		return false
	}
	return isLegacySignatureManifest(rd.Manifest)
}

// isLegacySignatureManifest reports whether raw is an image manifest with at
// least one simple-signing layer: the shape cosign's legacy format writes.
// It parses raw only; it verifies nothing.
func isLegacySignatureManifest(raw []byte) bool {
	if len(raw) > MaxResponseBytes {
		return false
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || (m.MediaType != "" && !m.MediaType.IsImage()) {
		return false
	}
	for _, l := range m.Layers {
		if l.MediaType == simpleSigningMediaType {
			return true
		}
	}
	return false
}

// refuseRedirect fails req when it is a redirect and its context asks for
// none (noRedirectKey).
func refuseRedirect(req *http.Request) error {
	if req.Response != nil && req.Context().Value(noRedirectKey{}) != nil {
		return fmt.Errorf("%w to %s", errLegacyRedirect, req.URL.Host)
	}
	return nil
}
