package trust

import (
	"context"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestUnsignedMessageCountsSignaturesOnly attaches real bundles by key to
// two images and reads them with a verifier that trusts key A only. An image
// signed and attested (SBOM and provenance, as a release does) by key B is
// refused as Unsigned naming one signature that did not verify, not three;
// an image that carries A's SBOM and provenance but no signature is refused
// as Unsigned saying it carries two attestations and no signature, which is
// the image `cosign verify --key` would pass.
func TestUnsignedMessageCountsSignaturesOnly(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	a, b := cosigntest.NewKey(t), cosigntest.NewKey(t)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	attest := func(ref plugins.ImageRef, k *cosigntest.Key) {
		for _, pt := range []string{plugins.SBOMPredicateType, plugins.ProvenancePredicateType} {
			reg.Attach(t, ref, k.Bundle(t, cosigntest.Statement(t, ref.Digest(), pt)), pt)
		}
	}
	byB := reg.PushImage(t, "plugins/by-b", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, byB, b)
	attest(byB, b)
	attestedOnly := reg.PushImage(t, "plugins/attested-only", cosigntest.ManifestLabel(t, m))
	attest(attestedOnly, a)

	policy := ownerPolicy(t, a.SignersJSON(t, "a"))
	images, err := NewImageVerifier(policy)
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(images, policy)
	ctx := context.Background()

	got := v.Check(ctx, byB, &m)
	const one = "; 1 signature attached to it did not verify with the trusted signers' keys and certificates"
	if got.Reason != v1alpha1.ReasonUnsigned || !strings.Contains(got.Message, one) || strings.Contains(got.Message, "attestation") {
		t.Errorf("signed and attested by an untrusted key: %+v, want Unsigned saying %q and nothing of attestations", got, one)
	}

	got = v.Check(ctx, attestedOnly, &m)
	const two = "; it carries 2 attestations (such as an SBOM or provenance) and no signature: an attestation is a statement about the image, not a signature of it"
	if got.Reason != v1alpha1.ReasonUnsigned || !strings.HasSuffix(got.Message, two) || strings.Contains(got.Message, "did not verify") {
		t.Errorf("attested by a trusted key, not signed: %+v, want Unsigned ending %q", got, two)
	}
}
