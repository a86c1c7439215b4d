package cosign

import (
	"encoding/json"
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

// FuzzParseStatement feeds arbitrary statements to the attestation
// statement parser. It must never panic; a refusal wraps a documented
// reason; an accepted statement really names the digest as its one subject
// and the asked-for type, and its predicate is one JSON object.
func FuzzParseStatement(f *testing.F) {
	hexD := strings.Repeat("5e", 32)
	digest := "sha256:" + hexD
	good := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + hexD + `"}}],"predicateType":"https://slsa.dev/provenance/v1","predicate":{"buildDefinition":{"buildType":"x"}}}`
	for _, seed := range []string{good, `{}`, `[]`, `{"_type":1}`, good + " ", strings.Replace(good, `"predicate":`, `"predicate":1,"predicate":`, 1), ""} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		pred, err := ParseStatement(raw, digest, plugins.ProvenancePredicateType)
		if err != nil {
			if !errors.Is(err, ErrMalformedStatement) && !errors.Is(err, ErrPredicateType) {
				t.Fatalf("refusal without a documented reason: %v", err)
			}
			if pred != nil {
				t.Fatal("a refused statement returned a predicate")
			}
			return
		}
		var st struct {
			Subject []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
			PredicateType string `json:"predicateType"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("accepted JSON that does not parse: %v", err)
		}
		if len(st.Subject) != 1 || len(st.Subject[0].Digest) != 1 || st.Subject[0].Digest["sha256"] != hexD || st.PredicateType != plugins.ProvenancePredicateType {
			t.Fatalf("accepted %q", raw)
		}
		var obj map[string]any
		if err := json.Unmarshal(pred, &obj); err != nil {
			t.Fatalf("predicate %q is not an object: %v", pred, err)
		}
	})
}
