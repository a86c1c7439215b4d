package trust

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestSignerFromMessageReadsWhatCheckWrites checks that the signer named in
// the messages Check writes for a Verified and a SignedByTrustedSigner image
// (real signatures, a catalog entry pinning one digest) is read back.
func TestSignerFromMessageReadsWhatCheckWrites(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	owner, publisher := cosigntest.NewKey(t), cosigntest.NewKey(t)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	pinned := reg.PushImage(t, "plugins/pinned", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, pinned, publisher)
	other := reg.PushImage(t, "plugins/other", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, other, owner)

	raw, err := json.Marshal(map[string]any{"plugins": []any{map[string]any{
		"name": "pinned", "image": pinned.String(),
		"publisher": map[string]string{"name": "acme, the publisher", "publicKey": publisher.PublicKeyPEM(t)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := plugins.ParseCatalog(raw)
	if err != nil {
		t.Fatal(err)
	}
	signers, err := plugins.ParseOwnerSigners(owner.SignersJSON(t, "owner"))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := plugins.NewTrustPolicy(cat, signers)
	if err != nil {
		t.Fatal(err)
	}
	images, err := cosign.NewVerifier(cosign.WithPublicKeys(policy.PublicKeys()))
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(images, policy)
	for ref, want := range map[plugins.ImageRef]struct{ reason, signer string }{
		pinned: {v1alpha1.ReasonVerified, "acme, the publisher"},
		other:  {v1alpha1.ReasonSignedByTrustedSigner, "owner"},
	} {
		got := v.Check(context.Background(), ref, &m)
		if got.Reason != want.reason {
			t.Fatalf("%s: %+v, want reason %s", ref, got, want.reason)
		}
		if s := SignerFromMessage(got.Reason, got.Message); s != want.signer {
			t.Errorf("SignerFromMessage(%q, %q) = %q, want %q", got.Reason, got.Message, s, want.signer)
		}
	}
}

// TestSignerFromMessageFailsClosed: other reasons, other messages and an
// ambiguous name give no signer.
func TestSignerFromMessageFailsClosed(t *testing.T) {
	for name, tc := range map[string]struct{ reason, message, want string }{
		"fail static suffix kept":     {v1alpha1.ReasonSignedByTrustedSigner, "signed by trusted signer o; not a verified catalog plugin; the running version was verified at X and keeps running", "o"},
		"refused":                     {v1alpha1.ReasonUntrustedSigner, "signed by trusted signer o; not a verified catalog plugin", ""},
		"unknown":                     {v1alpha1.ReasonRegistryUnavailable, "cannot read", ""},
		"foreign message":             {v1alpha1.ReasonVerified, "looks fine", ""},
		"no name":                     {v1alpha1.ReasonVerified, "signed by , the catalog's publisher for this digest", ""},
		"ambiguous name":              {v1alpha1.ReasonSignedByTrustedSigner, "signed by trusted signer a; not a verified catalog plugin; not a verified catalog plugin", ""},
		"verified wording for signed": {v1alpha1.ReasonSignedByTrustedSigner, "signed by o, the catalog's publisher for this digest", ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := SignerFromMessage(tc.reason, tc.message); got != tc.want {
				t.Errorf("SignerFromMessage(%q, %q) = %q, want %q", tc.reason, tc.message, got, tc.want)
			}
		})
	}
}
