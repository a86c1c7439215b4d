package cosign

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerifyAttestations attaches a signature, a keyless SBOM, a key-signed
// provenance and a keyless provenance about another digest to one image, and
// asks for each predicate type: only the matching, verifying attestations
// come back, with their signers and predicates; the rest are skipped with a
// reason. Verify still sees exactly one signature.
func TestVerifyAttestations(t *testing.T) {
	ctx := context.Background()
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	key := cosigntest.NewKey(t)
	ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, testManifest))
	other := reg.PushImage(t, "plugins/fx", map[string]string{"x": "y"})
	v := newVerifier(t, k, WithPublicKeys([]string{key.PublicKeyPEM(t)}))

	stmt := func(digest, pt, pred string) []byte {
		b, err := ocisign.StatementWith(digest, pt, []byte(pred))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reg.Sign(t, ref, k)
	sbom := reg.Attach(t, ref, k.Bundle(t, stmt(ref.Digest(), plugins.SBOMPredicateType, `{"bomFormat":"CycloneDX"}`)), plugins.SBOMPredicateType)
	prov := reg.Attach(t, ref, key.Bundle(t, stmt(ref.Digest(), plugins.ProvenancePredicateType, `{"buildDefinition":{}}`)), plugins.ProvenancePredicateType)
	elsewhere := reg.Attach(t, ref, k.Bundle(t, stmt(other.Digest(), plugins.ProvenancePredicateType, `{}`)), plugins.ProvenancePredicateType)

	got, rep, err := v.VerifyAttestations(ctx, ref, plugins.SBOMPredicateType)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Referrer != sbom.String() || got[0].Signer != keylessID() || string(got[0].Predicate) != `{"bomFormat":"CycloneDX"}` {
		t.Fatalf("SBOMs %+v", got)
	}
	if rep.Verified != 1 || len(rep.Skipped) != 3 {
		t.Errorf("SBOM report %+v", rep)
	}
	// The type is looked at first: the provenance about another digest is
	// of another type here, whether or not it would verify.
	for _, s := range rep.Skipped {
		if !errors.Is(s.Reason, ErrPredicateType) {
			t.Errorf("skipped %s: %v, want %v", s.Referrer, s.Reason, ErrPredicateType)
		}
	}

	got, rep, err = v.VerifyAttestations(ctx, ref, plugins.ProvenancePredicateType)
	if err != nil || len(got) != 1 || got[0].Referrer != prov.String() || got[0].Signer.PublicKeyPEM != key.PublicKeyPEM(t) {
		t.Fatalf("provenance %+v: %v", got, err)
	}
	for _, s := range rep.Skipped {
		want := ErrPredicateType
		if s.Referrer == elsewhere.String() {
			want = ErrUnverifiedBundle
		}
		if !errors.Is(s.Reason, want) {
			t.Errorf("provenance: skipped %s: %v, want %v", s.Referrer, s.Reason, want)
		}
	}

	// Attestations never count as signatures.
	signed, _ := mustVerify(t, v, ref)
	if len(signed.Signatures) != 1 {
		t.Errorf("signatures %+v", signed.Signatures)
	}
	if _, _, err := v.VerifyAttestations(ctx, ref, ""); err == nil {
		t.Error("no predicate type was accepted")
	}
}

// TestParseStatement: the statement parser takes exactly one subject of
// exactly the image's digest, the asked-for type and an object predicate.
func TestParseStatement(t *testing.T) {
	hexD := strings.Repeat("ab", 32)
	digest := "sha256:" + hexD
	good := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + hexD + `"}}],"predicateType":"https://cyclonedx.org/bom","predicate":{"a":[1,{"b":2}]}}`
	pred, err := ParseStatement([]byte(good), digest, plugins.SBOMPredicateType)
	if err != nil || string(pred) != `{"a":[1,{"b":2}]}` {
		t.Fatalf("good statement: %s, %v", pred, err)
	}
	named := strings.Replace(good, `{"digest"`, `{"name":"img","digest"`, 1)
	if _, err := ParseStatement([]byte(named), digest, plugins.SBOMPredicateType); err != nil {
		t.Errorf("a named subject: %v", err)
	}
	for name, tc := range map[string]struct {
		raw  string
		want error
	}{
		"other type":        {strings.Replace(good, "cyclonedx.org/bom", "slsa.dev/provenance/v1", 1), ErrPredicateType},
		"other digest":      {strings.Replace(good, hexD, strings.Repeat("cd", 32), 1), ErrMalformedStatement},
		"two subjects":      {strings.Replace(good, `"subject":[`, `"subject":[{"digest":{"sha256":"`+strings.Repeat("cd", 32)+`"}},`, 1), ErrMalformedStatement},
		"no subject":        {strings.Replace(good, `{"digest":{"sha256":"`+hexD+`"}}`, ``, 1), ErrMalformedStatement},
		"two algorithms":    {strings.Replace(good, `{"sha256"`, `{"sha512":"00","sha256"`, 1), ErrMalformedStatement},
		"unknown field":     {strings.Replace(good, `"predicate":`, `"extra":1,"predicate":`, 1), ErrMalformedStatement},
		"repeated key":      {strings.Replace(good, `"predicate":`, `"predicateType":"x","predicate":`, 1), ErrMalformedStatement},
		"repeated deep":     {strings.Replace(good, `{"b":2}`, `{"b":2,"b":3}`, 1), ErrMalformedStatement},
		"old type":          {strings.Replace(good, "Statement/v1", "Statement/v0.1", 1), ErrMalformedStatement},
		"array predicate":   {strings.Replace(good, `{"a":[1,{"b":2}]}`, `[1]`, 1), ErrMalformedStatement},
		"no predicate":      {strings.Replace(good, `,"predicate":{"a":[1,{"b":2}]}`, ``, 1), ErrMalformedStatement},
		"trailing data":     {good + `{}`, ErrMalformedStatement},
		"not json":          {"nope", ErrMalformedStatement},
		"too large":         {good[:len(good)-1] + `,"pad":"` + strings.Repeat("x", MaxBundleBytes) + `"}`, ErrMalformedStatement},
		"uppercase digest":  {strings.Replace(good, hexD, strings.ToUpper(hexD), 1), ErrMalformedStatement},
		"digest is no text": {strings.Replace(good, `"`+hexD+`"`, `1`, 1), ErrMalformedStatement},
	} {
		if _, err := ParseStatement([]byte(tc.raw), digest, plugins.SBOMPredicateType); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := ParseStatement([]byte(good), "sha256:"+strings.ToUpper(hexD), plugins.SBOMPredicateType); err == nil {
		t.Error("an uppercase digest to compare with was accepted")
	}
}
