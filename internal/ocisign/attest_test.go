package ocisign

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// TestAttest attaches an SBOM to an image, with and without the Referrers
// API, and checks the referrer as cosign selects it (bundle artifact type,
// the predicate type annotation) and that the statement verifies with its
// predicate and does not count as a signature.
func TestAttest(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrers)))
		t.Cleanup(srv.Close)
		host := strings.TrimPrefix(srv.URL, "http://")
		ctx := context.Background()
		img, err := PluginImage(plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}, map[string][]byte{"plugin": []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := Push(ctx, host, "plugins/demo", img)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := NewKeySigner()
		if err != nil {
			t.Fatal(err)
		}
		h, err := Attest(ctx, signer, ref, plugins.SBOMPredicateType, []byte(` {"bomFormat": "CycloneDX"} `))
		if err != nil {
			t.Fatal(err)
		}
		d, err := name.NewDigest(ref.String(), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Referrers(d)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 || im.Manifests[0].Digest != h || im.Manifests[0].Annotations["dev.sigstore.bundle.predicateType"] != plugins.SBOMPredicateType {
			t.Fatalf("referrers %v: %+v", referrers, im.Manifests)
		}
		// This registry lists the config's media type as the artifact type;
		// the manifest itself names the bundle's, as cosign writes it.
		desc, err := remote.Get(d.Context().Digest(h.String()))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ ArtifactType string }
		if err := json.Unmarshal(desc.Manifest, &m); err != nil || m.ArtifactType != BundleMediaType {
			t.Errorf("referrers %v: artifact type %q, %v", referrers, m.ArtifactType, err)
		}
		pem, _ := signer.PublicKeyPEM()
		v, err := cosign.NewVerifier(cosign.WithPublicKeys([]string{pem}))
		if err != nil {
			t.Fatal(err)
		}
		atts, rep, err := v.VerifyAttestations(ctx, ref, plugins.SBOMPredicateType)
		if err != nil || len(atts) != 1 || string(atts[0].Predicate) != `{"bomFormat":"CycloneDX"}` {
			t.Fatalf("referrers %v: %+v, %+v, %v", referrers, atts, rep, err)
		}
		if got, _, err := v.Verify(ctx, ref); err != nil || len(got.Signatures) != 0 {
			t.Errorf("referrers %v: the attestation counted as a signature: %+v, %v", referrers, got, err)
		}
	}
}

// TestStatementWith: the statement names the digest, the type and the
// predicate; bad input is refused, and a signature is not an attestation.
func TestStatementWith(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	raw, err := StatementWith(digest, plugins.ProvenancePredicateType, []byte(`{"b":1, "a":2}`))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	want := `{"_type":"https://in-toto.io/Statement/v1","predicate":{"b":1,"a":2},"predicateType":"https://slsa.dev/provenance/v1","subject":[{"digest":{"sha256":"` + strings.Repeat("ab", 32) + `"}}]}`
	if string(raw) != want {
		t.Errorf("statement %s\nwant %s", raw, want)
	}
	for name, tc := range map[string]struct{ digest, pt, pred string }{
		"sha512":     {"sha512:" + strings.Repeat("ab", 64), plugins.SBOMPredicateType, `{}`},
		"short":      {"sha256:abab", plugins.SBOMPredicateType, `{}`},
		"no type":    {digest, "", `{}`},
		"array":      {digest, plugins.SBOMPredicateType, `[]`},
		"not json":   {digest, plugins.SBOMPredicateType, `{`},
		"two values": {digest, plugins.SBOMPredicateType, `{} {}`},
		"too large":  {digest, plugins.SBOMPredicateType, `{"a":"` + strings.Repeat("x", MaxPredicateBytes) + `"}`},
	} {
		if _, err := StatementWith(tc.digest, tc.pt, []byte(tc.pred)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	signer, err := NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := plugins.ParseImageRef("r.example/x@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Attest(context.Background(), signer, ref, plugins.SignPredicateType, []byte(`{}`)); err == nil {
		t.Error("an attestation of the signature predicate type was made")
	}
}
