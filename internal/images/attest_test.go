//go:build heavy

package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/mod/modfile"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// TestAttest builds the egress proxy for the host platform, pushes it to an
// in-process registry, attests it with a key as `make attest` does, and
// verifies what a user would: both attestations verify with the key and
// not with another, the SBOM lists a module at the version go.mod pins and
// the toolchain's Go, the provenance names the commit and
// the command, a statement about another digest is refused, and a second
// build gives byte-identical predicates.
func TestAttest(t *testing.T) {
	ctx := context.Background()
	specs, err := SelectSpecs("egress-proxy")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Source: testSource(t), Specs: specs, Platforms: []v1.Platform{testPlatform()}, Progress: testWriter{t}}
	res, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	host := newRegistry(t)
	pushed, err := Push(ctx, res, host, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	prov := Provenance{BuilderID: LocalBuilderID, Command: "make attest KEY=release.key"}
	att, err := Attest(ctx, res, pushed, signer, prov, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(att) != 1 || att[0].Name != "egress-proxy" || att[0].SBOM == "" || att[0].Provenance == "" || att[0].SBOM == att[0].Provenance {
		t.Fatalf("attested %+v", att)
	}
	ref, err := plugins.ParseImageRef(pushed[0].Ref)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := signer.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	v := keyVerifier(t, pem)

	// The SBOM: verified with the key, the provenance beside it skipped.
	sboms, rep, err := v.VerifyAttestations(ctx, ref, plugins.SBOMPredicateType)
	if err != nil {
		t.Fatal(err)
	}
	if len(sboms) != 1 || sboms[0].Referrer != att[0].SBOM || sboms[0].Signer.PublicKeyPEM != pem {
		t.Fatalf("SBOM attestations %+v, report %+v", sboms, rep)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Referrer != att[0].Provenance || !errors.Is(rep.Skipped[0].Reason, cosign.ErrPredicateType) {
		t.Errorf("report %+v: want the provenance skipped for its predicate type", rep)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(sboms[0].Predicate), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || bom.SerialNumber != "" || bom.Metadata.Timestamp != res.Source.Epoch.UTC().Format("2006-01-02T15:04:05Z") {
		t.Errorf("BOM spec %v, serial %q, timestamp %q", bom.SpecVersion, bom.SerialNumber, bom.Metadata.Timestamp)
	}
	if c := bom.Metadata.Component; c == nil || c.Name != ModulePath+"/cmd/egress-proxy" && c.Name != ModulePath {
		t.Errorf("BOM component %+v", bom.Metadata.Component)
	}
	// The egress proxy does not link go-containerregistry (the operator
	// does: TestMake checks its SBOM); it links the Prometheus client.
	prom := goModVersion(t, res.Source.Root, "github.com/prometheus/client_golang")
	want := map[string]bool{
		"pkg:golang/github.com/prometheus/client_golang@" + prom: false,
		"pkg:golang/std@" + res.GoVersion:                        false,
	}
	var refs []string
	for _, c := range *bom.Components {
		refs = append(refs, c.BOMRef)
		if _, ok := want[c.PackageURL]; ok {
			want[c.PackageURL] = true
		}
		if c.Name == "github.com/prometheus/client_golang" && (c.Hashes != nil || c.Properties == nil || (*c.Properties)[0].Name != "go:sum") {
			t.Errorf("the Prometheus client: %+v, want its go.sum hash as a property and no hash", c)
		}
	}
	for purl, found := range want {
		if !found {
			t.Errorf("the SBOM lists no %s", purl)
		}
	}
	if !slices.IsSorted(refs) {
		t.Error("the SBOM's components are not sorted")
	}

	// The provenance.
	provs, _, err := v.VerifyAttestations(ctx, ref, plugins.ProvenancePredicateType)
	if err != nil || len(provs) != 1 || provs[0].Referrer != att[0].Provenance {
		t.Fatalf("provenance attestations %+v: %v", provs, err)
	}
	var p struct {
		BuildDefinition struct {
			BuildType          string
			ExternalParameters struct {
				Image, Version, Command string
				Platforms               []string
			}
			InternalParameters struct {
				GoVersion, SourceDateEpoch string
				GoFlags                    []string
			}
			ResolvedDependencies []struct {
				URI    string `json:"uri"`
				Digest map[string]string
			}
		}
		RunDetails struct {
			Builder  struct{ ID string }
			Metadata *struct{}
		}
	}
	if err := json.Unmarshal(provs[0].Predicate, &p); err != nil {
		t.Fatal(err)
	}
	bd := p.BuildDefinition
	if bd.BuildType != BuildType || bd.ExternalParameters.Image != "egress-proxy" || bd.ExternalParameters.Command != prov.Command ||
		bd.ExternalParameters.Version != res.Source.Version || !slices.Equal(bd.ExternalParameters.Platforms, []string{testPlatform().String()}) {
		t.Errorf("build definition %+v", bd)
	}
	if bd.InternalParameters.GoVersion != res.GoVersion || !slices.Equal(bd.InternalParameters.GoFlags, GoFlags) || bd.InternalParameters.SourceDateEpoch == "" {
		t.Errorf("internal parameters %+v", bd.InternalParameters)
	}
	if len(bd.ResolvedDependencies) != 1 || bd.ResolvedDependencies[0].Digest["gitCommit"] != res.Source.Commit || bd.ResolvedDependencies[0].URI != "git+"+SourceURL {
		t.Errorf("resolved dependencies %+v, want commit %s", bd.ResolvedDependencies, res.Source.Commit)
	}
	if p.RunDetails.Builder.ID != LocalBuilderID || p.RunDetails.Metadata != nil {
		t.Errorf("run details %+v", p.RunDetails)
	}

	// Another key verifies neither.
	other, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, err := other.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range []string{plugins.SBOMPredicateType, plugins.ProvenancePredicateType} {
		got, rep, err := keyVerifier(t, otherPEM).VerifyAttestations(ctx, ref, pt)
		if err != nil || len(got) != 0 || rep.Verified != 0 || len(rep.Skipped) != 2 {
			t.Errorf("%s with another key: %+v, %+v, %v", pt, got, rep, err)
		}
	}

	// A statement about another digest, signed by the trusted key and
	// attached to this image, is refused; so is one that names this digest
	// and another.
	otherDigest := res.Images[0].Images[0].Digest.String()
	sbom, err := SBOM(res.Source, res.Images[0])
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := ocisign.StatementWith(otherDigest, plugins.SBOMPredicateType, sbom)
	if err != nil {
		t.Fatal(err)
	}
	attach(t, signer, ref, stmt)
	two := strings.Replace(string(stmt), `"subject":[`, `"subject":[{"digest":{"sha256":"`+strings.TrimPrefix(ref.Digest(), "sha256:")+`"}},`, 1)
	attach(t, signer, ref, []byte(two))
	sboms, rep, err = v.VerifyAttestations(ctx, ref, plugins.SBOMPredicateType)
	if err != nil || len(sboms) != 1 || sboms[0].Referrer != att[0].SBOM {
		t.Fatalf("after attaching statements about other digests: %+v, %v", sboms, err)
	}
	var unverified, malformed int
	for _, s := range rep.Skipped {
		switch {
		case errors.Is(s.Reason, cosign.ErrUnverifiedBundle):
			unverified++
		case errors.Is(s.Reason, cosign.ErrMalformedStatement):
			malformed++
		}
	}
	if unverified != 1 || malformed != 1 {
		t.Errorf("skipped %+v: want the other digest's statement unverified and the two-subject one malformed", rep.Skipped)
	}

	// The same build again: the same predicates, byte for byte, and the
	// same as what was signed.
	again, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	sbom2, err := SBOM(again.Source, again.Images[0])
	if err != nil {
		t.Fatal(err)
	}
	prov1, err := prov.Predicate(res, res.Images[0])
	if err != nil {
		t.Fatal(err)
	}
	prov2, err := prov.Predicate(again, again.Images[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sbom, sbom2) || !bytes.Equal(sbom, sboms[0].Predicate) {
		t.Error("the SBOM differs between two builds of one tree, or from what was signed")
	}
	if !bytes.Equal(prov1, prov2) || !bytes.Equal(prov1, provs[0].Predicate) {
		t.Error("the provenance differs between two builds of one tree, or from what was signed")
	}
}

func keyVerifier(t *testing.T, pem string) *cosign.Verifier {
	t.Helper()
	v, err := cosign.NewVerifier(cosign.WithPublicKeys([]string{pem}))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// attach signs stmt as it is and attaches it to ref as an SBOM.
func attach(t *testing.T, signer *ocisign.KeySigner, ref plugins.ImageRef, stmt []byte) {
	t.Helper()
	bundle, err := signer.Bundle(context.Background(), stmt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ocisign.Attach(context.Background(), ref, bundle, plugins.SBOMPredicateType); err != nil {
		t.Fatal(err)
	}
}

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, root, module string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	t.Fatalf("go.mod requires no %s", module)
	return ""
}
