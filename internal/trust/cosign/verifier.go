package cosign

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// ImageVerifier is what the operator's PolicyVerifier needs from this
// package: the verified signers of an image digest and its signed manifest.
// *Verifier implements it; operator tests may fake it.
type ImageVerifier interface {
	Verify(ctx context.Context, ref plugins.ImageRef) (plugins.SignedImage, Report, error)
}

var _ ImageVerifier = (*Verifier)(nil)

// Verifier finds the cosign bundles attached to an image digest as OCI
// referrers and verifies them offline (D-17, D-56). It reads registries
// over HTTPS, anonymously unless given WithKeychain, and is safe for
// concurrent use.
type Verifier struct {
	bundles   *bundleVerifier
	transport http.RoundTripper
	insecure  map[string]bool
	timeout   time.Duration
	remote    []remote.Option
	labelGate func([]plugins.SignatureIdentity) bool
}

// NewVerifier builds a Verifier. Without WithTrustedMaterial it trusts the
// embedded Sigstore public-good root and requires SCTs.
func NewVerifier(opts ...Option) (*Verifier, error) {
	o := options{requireSCT: true}
	for _, opt := range opts {
		opt(&o)
	}
	if o.trusted == nil {
		tr, err := PublicGoodTrustedRoot()
		if err != nil {
			return nil, err
		}
		o.trusted = tr
	}
	bv, err := newBundleVerifier(o.trusted, o.requireSCT, o.publicKeys, plugins.SignPredicateType)
	if err != nil {
		return nil, err
	}
	base := o.transport
	if base == nil {
		def := remote.DefaultTransport.(*http.Transport).Clone()
		dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		def.DialContext = redirectSafeDialer(dialer.DialContext)
		base = def
	}
	insecure := make(map[string]bool, len(o.insecure))
	for _, h := range o.insecure {
		insecure[h] = true
	}
	timeout := o.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ropts := []remote.Option{remote.WithUserAgent("openfief-operator")}
	if o.keychain != nil {
		ropts = append(ropts, remote.WithAuthFromKeychain(o.keychain))
	} else {
		ropts = append(ropts, remote.WithAuth(authn.Anonymous))
	}
	if o.retryBackoff != nil {
		ropts = append(ropts, remote.WithRetryBackoff(*o.retryBackoff))
	}
	return &Verifier{
		labelGate: o.labelGate,
		remote:    ropts,
		bundles:   bv,
		transport: &guardedTransport{base: base, insecure: insecure, maxBody: MaxResponseBytes},
		insecure:  insecure,
		timeout:   timeout,
	}, nil
}

// Verify reports who signed ref's digest and, for a signed image, the
// manifest from its io.openfief.plugin.manifest label (D-42). It lists the
// digest's referrers (the Referrers API, or the sha256-<hex> tag where the
// registry lacks it), verifies every Sigstore bundle among them as a
// signature over exactly that digest, and skips, and reports, any bundle
// that does not parse or verify; one bad bundle never hides a good one.
//
// With no verified bundle the image is unsigned: Signatures empty, Manifest
// nil, error nil; the label is not read (D-57). Report.LegacySignature then
// says whether a signature in cosign's legacy format was found instead (one
// more bounded read, whose failure changes nothing). A registry that cannot be
// reached or refuses a read yields an error wrapping ErrRegistryUnavailable
// instead, and also ErrRegistryUnauthorized when it answered 401 or 403. For a signed image whose label does not parse, the error wraps
// plugins.ErrInvalidLabel and the SignedImage keeps its Signatures; the
// operator reports InvalidImage. For a signed image index, the label is read
// from its linux/amd64 image, or its only image (ErrNoPlatform otherwise).
// Signatures are sorted and free of duplicates.
func (v *Verifier) Verify(ctx context.Context, ref plugins.ImageRef) (plugins.SignedImage, Report, error) {
	out := plugins.SignedImage{Image: ref}
	if ref.IsZero() {
		return out, Report{}, fmt.Errorf("%w: empty image reference", plugins.ErrInvalidImage)
	}
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	d, p, err := v.open(ref)
	if err != nil {
		return out, Report{}, err
	}

	found, rep, err := listBundles(ctx, p, d)
	if err != nil {
		return out, rep, err
	}
	for _, f := range found {
		id, err := v.bundles.verify(f.raw, ref.Digest())
		if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{Referrer: f.referrer, Reason: err})
			continue
		}
		rep.Verified++
		out.Signatures = append(out.Signatures, id)
	}
	if len(out.Signatures) == 0 {
		rep.LegacySignature = rep.LegacySignature || hasLegacySignature(ctx, p, d)
		return out, rep, nil
	}
	out.Signatures = sortedUnique(out.Signatures)
	if v.labelGate != nil && !v.labelGate(out.Signatures) {
		return out, rep, nil
	}

	m, err := readManifestLabel(ctx, p, d)
	if err != nil {
		return out, rep, err
	}
	out.Manifest = m
	return out, rep, nil
}

// open names ref's digest, over plain HTTP for an insecure or loopback
// registry, and makes the call's puller: one per call, which pings the
// registry and fetches a token once for all of the call's reads.
func (v *Verifier) open(ref plugins.ImageRef) (name.Digest, *remote.Puller, error) {
	if ref.IsZero() {
		return name.Digest{}, nil, fmt.Errorf("%w: empty image reference", plugins.ErrInvalidImage)
	}
	var nameOpts []name.Option
	if v.insecure[ref.Registry()] || isLoopback(ref.Registry()) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	d, err := name.NewDigest(ref.String(), nameOpts...)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("%w: %w", plugins.ErrInvalidImage, err)
	}
	p, err := remote.NewPuller(append([]remote.Option{remote.WithTransport(v.transport)}, v.remote...)...)
	if err != nil {
		return name.Digest{}, nil, err
	}
	return d, p, nil
}

// sortedUnique orders identities deterministically and drops repeats, such
// as one signer's two bundles.
func sortedUnique(ids []plugins.SignatureIdentity) []plugins.SignatureIdentity {
	slices.SortFunc(ids, func(a, b plugins.SignatureIdentity) int {
		return cmp.Or(cmp.Compare(a.Issuer, b.Issuer), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.PublicKeyPEM, b.PublicKeyPEM))
	})
	return slices.Compact(ids)
}
