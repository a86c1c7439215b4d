package images

import (
	"context"
	"fmt"
	"io"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Attested is one pushed index and the referrers that carry its
// attestations.
type Attested struct {
	// Name is the image's name, Ref its index in the registry.
	Name string `json:"name"`
	Ref  string `json:"ref"`
	// SBOM and Provenance are the digests of the referrer manifests of its
	// signed SBOM and provenance.
	SBOM       string `json:"sbom"`
	Provenance string `json:"provenance"`
}

// Attest makes the SBOM (SBOM) and SLSA provenance (p.Predicate) of each
// pushed index of res, signs each as an in-toto statement about the index's
// digest with signer, and attaches it as a referrer (ocisign.Attest), as
// `cosign attest --new-bundle-format --type cyclonedx|slsaprovenance1`
// does. The predicates are deterministic; the bundles are not (a signature
// is randomised), and no image digest depends on them.
func Attest(ctx context.Context, res *Result, pushed []Pushed, signer ocisign.BundleSigner, p Provenance, progress io.Writer) ([]Attested, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	var out []Attested
	for _, pu := range pushed {
		a, err := attestOne(ctx, res, pu, signer, p)
		if err != nil {
			return nil, fmt.Errorf("attest %s: %w", pu.Name, err)
		}
		fmt.Fprintf(progress, "attested %s: sbom %s, provenance %s\n", a.Ref, a.SBOM, a.Provenance)
		out = append(out, a)
	}
	return out, nil
}

func attestOne(ctx context.Context, res *Result, pu Pushed, signer ocisign.BundleSigner, p Provenance) (Attested, error) {
	ref, err := plugins.ParseImageRef(pu.Ref)
	if err != nil {
		return Attested{}, err
	}
	var built *Built
	for i := range res.Images {
		if res.Images[i].Spec.Name == pu.Name {
			built = &res.Images[i]
		}
	}
	if built == nil {
		return Attested{}, fmt.Errorf("the build has no image %s", pu.Name)
	}
	if built.Digest.String() != ref.Digest() {
		return Attested{}, fmt.Errorf("pushed as %s, built as %s", ref.Digest(), built.Digest)
	}
	sbom, err := SBOM(res.Source, *built)
	if err != nil {
		return Attested{}, err
	}
	prov, err := p.Predicate(res, *built)
	if err != nil {
		return Attested{}, err
	}
	sbomRef, err := ocisign.Attest(ctx, signer, ref, plugins.SBOMPredicateType, sbom)
	if err != nil {
		return Attested{}, err
	}
	provRef, err := ocisign.Attest(ctx, signer, ref, plugins.ProvenancePredicateType, prov)
	if err != nil {
		return Attested{}, err
	}
	return Attested{Name: pu.Name, Ref: pu.Ref, SBOM: sbomRef.String(), Provenance: provRef.String()}, nil
}
