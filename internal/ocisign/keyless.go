package ocisign

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// The public-good Sigstore instance, which cosign uses by default and whose
// trusted root the operator embeds (internal/trust/cosign/trusted_root.json).
const (
	PublicGoodFulcio = "https://fulcio.sigstore.dev"
	PublicGoodRekor  = "https://rekor.sigstore.dev"
)

// TokenSource returns a fresh OIDC identity token for Fulcio.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// KeylessOptions says where a KeylessSigner gets its identity and
// certificate. Empty URLs mean the public-good instance.
type KeylessOptions struct {
	// Tokens gives the OIDC token Fulcio certifies (required); in a GitHub
	// Actions job, GitHubTokenSourceFromEnv.
	Tokens TokenSource
	// FulcioURL is the certificate authority, https.
	FulcioURL string
	// RekorURL is the transparency log (Rekor v1 API), https.
	RekorURL string
	// TrustedRoot checks every bundle before it is returned: the
	// certificate chains to its Fulcio, the Rekor entry and the SCT verify
	// (required; for the public-good instance,
	// internal/trust/cosign.PublicGoodTrustedRoot, which the operator embeds).
	TrustedRoot root.TrustedMaterial
}

// KeylessSigner signs like `cosign sign` in CI: for each bundle a fresh
// ephemeral key, certified by Fulcio for the identity in an OIDC token, and
// the signature entered into Rekor, whose inclusion proof goes into the
// bundle. The operator trusts the result by the certificate's issuer and
// subject (D-45); the key itself is forgotten.
type KeylessSigner struct {
	tokens TokenSource
	fulcio string
	rekor  string
	root   root.TrustedMaterial
	// transport reaches Fulcio (nil: http.DefaultTransport); tests set it.
	transport http.RoundTripper
}

// NewKeylessSigner checks opts and makes the signer; it contacts nothing.
func NewKeylessSigner(opts KeylessOptions) (*KeylessSigner, error) {
	if opts.Tokens == nil {
		return nil, errors.New("keyless signing needs an OIDC token source")
	}
	s := &KeylessSigner{tokens: opts.Tokens, fulcio: opts.FulcioURL, rekor: opts.RekorURL, root: opts.TrustedRoot}
	if s.root == nil {
		return nil, errors.New("keyless signing needs the trusted root its bundles are checked against")
	}
	if s.fulcio == "" {
		s.fulcio = PublicGoodFulcio
	}
	if s.rekor == "" {
		s.rekor = PublicGoodRekor
	}
	for _, u := range []string{s.fulcio, s.rekor} {
		if !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("keyless signing: %q is not an https URL", u)
		}
	}
	return s, nil
}

// Sign signs ref's digest and stores the bundle as a referrer of that
// digest, as KeySigner.Sign does.
func (s *KeylessSigner) Sign(ctx context.Context, ref plugins.ImageRef) error {
	return signRef(ctx, ref, s)
}

// Bundle signs statement in a DSSE envelope with a fresh key certified by
// Fulcio and logged in Rekor, verifies the result against the trusted root,
// and returns the Sigstore bundle (JSON). Errors
// carry neither the token nor the services' answers verbatim.
func (s *KeylessSigner) Bundle(ctx context.Context, statement []byte) ([]byte, error) {
	token, err := s.tokens.Token(ctx)
	if err != nil {
		return nil, err
	}
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, err
	}
	transport := s.transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: inTotoType}, kp, sign.BundleOptions{
		CertificateProvider:        sign.NewFulcio(&sign.FulcioOptions{BaseURL: s.fulcio, Retries: 2, Transport: noRedirects{transport}}),
		CertificateProviderOptions: &sign.CertificateProviderOptions{IDToken: token},
		TransparencyLogs:           []sign.Transparency{sign.NewRekor(&sign.RekorOptions{BaseURL: s.rekor, Retries: 2})},
		Context:                    ctx,
		TrustedRoot:                s.root,
	})
	if err != nil {
		return nil, fmt.Errorf("keyless signing: %s", redact(err.Error(), token))
	}
	return protojson.Marshal(pb)
}

// redact quotes msg, cut to a bound, with secret replaced: sigstore-go's
// Fulcio client puts the service's answer into its error.
func redact(msg, secret string) string {
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "<token>")
	}
	return fmt.Sprintf("%.300q", msg)
}

// noRedirects turns a redirect into an error: sigstore-go's Fulcio client
// follows redirects, and the token must go to Fulcio only.
type noRedirects struct{ next http.RoundTripper }

func (t noRedirects) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s answered a redirect (%d), not followed", req.URL.Host, resp.StatusCode)
	}
	return resp, nil
}
