package cosign

import (
	"errors"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// FuzzBundleVerify feeds arbitrary bytes to the bundle verifier the
// registry path uses. It must never panic, every refusal must carry one of
// the documented reasons, and anything that verifies must name a signer
// that really signed a seed: garbage never yields a signature.
func FuzzBundleVerify(f *testing.F) {
	digest := "sha256:" + strings.Repeat("5e", 32)
	k := cosigntest.NewKeyless(f, testIssuer, testSubject)
	key := cosigntest.NewKey(f)
	bv, err := newBundleVerifier(k.VS, false, []string{key.PublicKeyPEM(f)}, plugins.SignPredicateType)
	if err != nil {
		f.Fatal(err)
	}
	stmt := cosigntest.Statement(f, digest, plugins.SignPredicateType)
	for _, seed := range [][]byte{
		k.Bundle(f, stmt),
		k.BundleRekorV1At(f, stmt, nowPlus5m()),
		key.Bundle(f, stmt),
		publicGoodBundle,
		[]byte(`{}`),
		[]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`),
		[]byte("not json"),
		nil,
	} {
		f.Add(seed)
	}
	known := map[plugins.SignatureIdentity]bool{
		{Issuer: testIssuer, Subject: testSubject}: true,
		{PublicKeyPEM: key.PublicKeyPEM(f)}:        true,
	}

	f.Fuzz(func(t *testing.T, raw []byte) {
		id, err := bv.verify(raw, digest)
		if err != nil {
			if !errors.Is(err, ErrMalformedBundle) && !errors.Is(err, ErrUnverifiedBundle) && !errors.Is(err, ErrPredicateType) {
				t.Fatalf("refusal without a documented reason: %v", err)
			}
			if id != (plugins.SignatureIdentity{}) {
				t.Fatalf("refused bundle still reports identity %+v", id)
			}
			return
		}
		if !known[id] {
			t.Fatalf("verified as %+v, who signed no seed", id)
		}
	})
}
