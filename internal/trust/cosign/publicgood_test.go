package cosign

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/empty"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// publicGoodBundle is a bundle the public-good Sigstore instance produced
// (cosign attest, 2025-02-28); testdata/SOURCE.md names where it comes from.
//
//go:embed testdata/oci-attestation.sigstore.json
var publicGoodBundle []byte

// The vector's signer, from its Fulcio certificate, and its statement.
const (
	publicGoodIssuer        = "https://github.com/login/oauth"
	publicGoodSubject       = "cody@soyland.com"
	publicGoodPredicateType = "https://cosign.sigstore.dev/attestation/v1"
)

// publicGoodDigest reads the subject digest from the vector's own statement,
// since no registry of ours holds the image it was made for.
func publicGoodDigest(t testing.TB) string {
	t.Helper()
	var b struct {
		DSSEEnvelope struct {
			Payload string `json:"payload"`
		} `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(publicGoodBundle, &b); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var stmt struct {
		Subject []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if err := json.Unmarshal(payload, &stmt); err != nil {
		t.Fatal(err)
	}
	if len(stmt.Subject) != 1 || stmt.Subject[0].Digest["sha256"] == "" {
		t.Fatalf("statement subjects %+v, want one sha256", stmt.Subject)
	}
	return "sha256:" + stmt.Subject[0].Digest["sha256"]
}

// productionBundleVerifier is what NewVerifier builds by default, for a
// given predicate type: the embedded public-good root, transparency log,
// observer timestamps and SCT all required.
func productionBundleVerifier(t testing.TB, predicateType string) *bundleVerifier {
	t.Helper()
	tr, err := PublicGoodTrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	bv, err := newBundleVerifier(tr, true, nil, predicateType)
	if err != nil {
		t.Fatal(err)
	}
	return bv
}

func TestPublicGoodBundle(t *testing.T) {
	digest := publicGoodDigest(t)

	t.Run("verifies offline with the production root and options", func(t *testing.T) {
		got, err := productionBundleVerifier(t, publicGoodPredicateType).verify(publicGoodBundle, digest)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		want := plugins.SignatureIdentity{Issuer: publicGoodIssuer, Subject: publicGoodSubject}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("identity (-want +got):\n%s", diff)
		}
	})

	t.Run("another digest", func(t *testing.T) {
		other := "sha256:" + "00" + digest[len("sha256:00"):]
		if _, err := productionBundleVerifier(t, publicGoodPredicateType).verify(publicGoodBundle, other); !errors.Is(err, ErrUnverifiedBundle) {
			t.Errorf("err = %v, want ErrUnverifiedBundle", err)
		}
	})

	t.Run("an attestation is not an image signature", func(t *testing.T) {
		if _, err := productionBundleVerifier(t, plugins.SignPredicateType).verify(publicGoodBundle, digest); !errors.Is(err, ErrPredicateType) {
			t.Errorf("err = %v, want ErrPredicateType", err)
		}
	})

	t.Run("not trusted by another root", func(t *testing.T) {
		k := cosigntest.NewKeyless(t, testIssuer, testSubject)
		bv, err := newBundleVerifier(k.VS, false, nil, publicGoodPredicateType)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bv.verify(publicGoodBundle, digest); !errors.Is(err, ErrUnverifiedBundle) {
			t.Errorf("err = %v, want ErrUnverifiedBundle", err)
		}
	})

	// The vector signs go-containerregistry's empty image, so the whole
	// path can run too: attached as cosign attaches it, read back through
	// the default (production) Verifier, and refused as an attestation.
	t.Run("through a registry with the default verifier", func(t *testing.T) {
		reg := cosigntest.NewRegistry(t, true)
		ref := reg.Push(t, "plugins/empty", empty.Image)
		if ref.Digest() != digest {
			t.Fatalf("empty image digest %s, vector signs %s", ref.Digest(), digest)
		}
		referrer := reg.Attach(t, ref, publicGoodBundle, publicGoodPredicateType)
		v, err := NewVerifier()
		if err != nil {
			t.Fatal(err)
		}
		got, rep := mustVerify(t, v, ref)
		if len(got.Signatures) != 0 {
			t.Errorf("Signatures = %+v, want none: an attestation does not sign the image", got.Signatures)
		}
		if diff := cmp.Diff(map[string]error{referrer.String(): ErrPredicateType}, skippedReasons(t, rep), cmp.Comparer(errorsSame)); diff != "" {
			t.Errorf("skipped (-want +got):\n%s", diff)
		}
	})
}
