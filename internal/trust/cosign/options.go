package cosign

import (
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Defaults and caps. The caps bound what one verification reads, whatever
// the registry or the referrers attached to a digest hold.
const (
	// DefaultTimeout bounds one Verify call, all registry reads included.
	DefaultTimeout = 60 * time.Second
	// MaxReferrers is how many candidate bundle referrers are read per
	// digest; more are reported as ErrTooManyReferrers and not read.
	MaxReferrers = 32
	// MaxBundleBytes caps one bundle blob; cosign's are a few KiB.
	MaxBundleBytes = 1 << 20
	// MaxResponseBytes caps every registry response body (manifests,
	// referrer lists, image configs, bundles).
	MaxResponseBytes = 4 << 20
)

// options is what the Option functions set.
type options struct {
	trusted    root.TrustedMaterial
	publicKeys []string
	requireSCT bool
	insecure   []string
	transport  http.RoundTripper
	keychain   authn.Keychain
	timeout    time.Duration
	// retryBackoff replaces go-containerregistry's retry backoff; tests only.
	retryBackoff *remote.Backoff
	// labelGate, when set, must accept the verified signatures before the
	// label is read.
	labelGate func([]plugins.SignatureIdentity) bool
}

// Option configures a Verifier.
type Option func(*options)

// WithTrustedMaterial replaces the embedded public-good trust root for
// keyless bundles, such as with an owner's private Sigstore instance, or in
// tests with sigstore-go's virtual Sigstore (D-56).
func WithTrustedMaterial(tm root.TrustedMaterial) Option {
	return func(o *options) { o.trusted = tm }
}

// WithLabelGate makes Verify read an image's manifest label only when gate
// accepts its verified signatures, such as TrustPolicy.TrustsAnySignature:
// an image signed only by identities no policy trusts then costs no label
// read or parse. Its SignedImage has the signatures and
// no manifest, which the policy refuses as an untrusted signer anyway.
func WithLabelGate(gate func([]plugins.SignatureIdentity) bool) Option {
	return func(o *options) { o.labelGate = gate }
}

// WithPublicKeys adds PEM public keys (ECDSA, Ed25519 or RSA) whose
// key-signed bundles verify; the operator passes its key signers' keys
// (D-45). A verified signature reports the PEM exactly as given here.
func WithPublicKeys(pems []string) Option {
	return func(o *options) { o.publicKeys = append(o.publicKeys, pems...) }
}

// WithSCTRequired sets whether a keyless bundle's certificate must carry a
// signed certificate timestamp from a trusted CT log. It is true by default,
// as for the public-good instance; tests turn it off because the virtual
// Sigstore issues certificates without SCTs.
func WithSCTRequired(required bool) Option {
	return func(o *options) { o.requireSCT = required }
}

// WithInsecureRegistries lets the named registries (host[:port], as in the
// image reference) be read over plain HTTP. Loopback registries (127.0.0.1,
// localhost, [::1]) always may; every other registry is read over HTTPS.
func WithInsecureRegistries(hosts ...string) Option {
	return func(o *options) { o.insecure = append(o.insecure, hosts...) }
}

// WithTransport sets the HTTP transport under the registry client, such as
// one that counts requests in tests. The Verifier still wraps it with its
// plain-HTTP guard and response size cap.
func WithTransport(rt http.RoundTripper) Option {
	return func(o *options) { o.transport = rt }
}

// WithKeychain makes the Verifier read registries with the credentials kc
// resolves for each repository (such as a FileKeychain over a docker config
// file, or authn.DefaultKeychain) instead of anonymously. go-containerregistry
// sends them only to the registry they were resolved for, never across a
// redirect to another host.
func WithKeychain(kc authn.Keychain) Option {
	return func(o *options) { o.keychain = kc }
}

// WithTimeout bounds each Verify call; DefaultTimeout when unset or not
// positive.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// withRetryBackoff replaces go-containerregistry's retry backoff (1s, 3s)
// so tests of failing registries run fast.
func withRetryBackoff(b remote.Backoff) Option {
	return func(o *options) { o.retryBackoff = &b }
}
