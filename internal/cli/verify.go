package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	imagetrust "github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// verifyOptions are `openfief plugin verify`'s flags and argument.
type verifyOptions struct {
	env   *Env
	trust trustFlags

	// image is the argument IMAGE; ref is it parsed by Validate.
	image string
	ref   plugins.ImageRef
}

// newVerifyCommand builds `openfief plugin verify`: the operator's signature
// and label check, run locally (D-46, D-56).
func newVerifyCommand(env *Env) *cobra.Command {
	o := &verifyOptions{env: env}
	cmd := &cobra.Command{
		Use:   "verify IMAGE",
		Short: "Check an image's signature and show its signed manifest, as the operator would",
		Long: `Run the operator's signature check on IMAGE (repository@sha256:<hex>) on this
machine: the trusted signers are OpenFief's CI, the publishers of the embedded
catalog and the owner's signers from --signers. Signatures are Sigstore bundles
attached to the digest, verified offline against the bundled trust root; only
the registry is contacted. No cluster is needed.

On success it prints the signer, whether the image is Verified (a catalog entry
pins the digest and its publisher signed it) or only signed by a trusted
signer, the signed manifest label, and the SBOM and build provenance attached
to the digest as attestations that signer signed: each by its reference in the
registry, which cosign download attestation or crane manifest fetch. Otherwise it says exactly why the
operator would refuse the image, and the exit code says which:
3 unsigned, 4 untrusted signer, 5 manifest label missing or invalid,
6 invalid image, 7 registry unavailable (unknown; try again),
12 registry refused the read (401/403: a private image or no access).`,
		Example: `  # Trust your own key as the operator does with the openfief-trusted-signers ConfigMap
  openfief plugin verify ghcr.io/example/nbp-fx@sha256:<hex> --signers signers.json

  # A local registry over plain HTTP (loopback registries need no flag)
  openfief plugin verify registry.lan:5000/nbp-fx@sha256:<hex> --insecure-registry registry.lan:5000`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	o.trust.register(cmd.Flags(), false)
	return cmd
}

// Complete takes IMAGE.
func (o *verifyOptions) Complete(args []string) error {
	o.image = args[0]
	return nil
}

// Validate refuses an IMAGE not pinned by digest.
func (o *verifyOptions) Validate() error {
	ref, err := parseImage("IMAGE", o.image)
	if err != nil {
		return err
	}
	o.ref = ref
	return nil
}

// Run checks the image with the trust of --signers (no cluster), prints
// the outcome and, when admitted, its attestations.
func (o *verifyOptions) Run(ctx context.Context) error {
	env := o.env
	t, err := env.policyFromFile(o.trust.signersFile, o.trust.catalogFile)
	if err != nil {
		return err
	}
	res, err := env.checkImage(ctx, o.ref, t, o.trust)
	if err != nil {
		return err
	}
	printCheck(env.Out, res, t)
	if err := res.refusal(); err != nil {
		return err
	}
	return env.printAttestations(ctx, env.Out, res, t, o.trust)
}

// printCheck writes the outcome of an image check for a person.
func printCheck(w io.Writer, res imageCheck, t trust) {
	v := res.Verification
	fmt.Fprintf(w, "Image:      %s\n", display.Text(res.Ref.String()))
	fmt.Fprintf(w, "Trusted:    %s\n", describeTrusted(t))
	if !v.Verified() {
		fmt.Fprintf(w, "Result:     refused (%s)\n", display.Text(v.Reason))
		fmt.Fprintf(w, "Why:        %s\n", display.Message(v.Message))
		rep := res.Report
		if rep.Referrers > 0 || len(rep.Skipped) > 0 {
			fmt.Fprintf(w, "Referrers:  %d read, %d not signatures, %d signatures verified, %d skipped\n",
				rep.Referrers, rep.Ignored, rep.Verified, len(rep.Skipped))
			for _, s := range rep.Skipped {
				fmt.Fprintf(w, "  skipped %s: %s\n", display.Text(s.Referrer), display.Message(fmt.Sprint(s.Reason)))
			}
		}
		return
	}
	fmt.Fprintf(w, "Result:     %s\n", display.Text(v.Reason))
	signer := v.Signer
	if res.Signer != nil {
		signer = fmt.Sprintf("%s (%s, %s)", res.Signer.Name, res.Signer.Kind, describeIdentity(res.Signer.Identity))
	}
	fmt.Fprintf(w, "Signer:     %s\n", display.Text(signer))
	fmt.Fprintf(w, "Trust:      %s\n", display.Message(v.Message))
	if res.Manifest == nil {
		fmt.Fprintf(w, "Manifest:   none: the image has no %s label\n", plugins.ManifestLabel)
		return
	}
	fmt.Fprintf(w, "Signed manifest (label %s):\n", plugins.ManifestLabel)
	printManifest(w, "  ", *res.Manifest)
}

// describeTrusted names the trusted signers of t in the policy's order.
func describeTrusted(t trust) string {
	var names []string
	for _, s := range t.policy.Signers() {
		names = append(names, s.Name)
	}
	sources := display.Text(t.source) + "; " + display.Text(t.catalog)
	if t.sigstoreNote != "" {
		sources += "; " + display.Text(t.sigstoreNote)
	}
	return display.Join(names, ", ") + " (" + sources + ")"
}

// describeIdentity says how a signer is identified; all of it is public.
func describeIdentity(id plugins.SignerIdentity) string {
	switch {
	case id.IsKey():
		return "public key"
	case id.SubjectPattern != "":
		return fmt.Sprintf("issuer %s, subject matching %s", id.Issuer, id.SubjectPattern)
	default:
		return fmt.Sprintf("issuer %s, subject %s", id.Issuer, id.Subject)
	}
}

// attestationKinds are the attestations plugin verify lists, in its order.
var attestationKinds = []struct{ label, predicateType, format string }{
	{"SBOM:      ", plugins.SBOMPredicateType, "CycloneDX"},
	{"Provenance:", plugins.ProvenancePredicateType, "SLSA v1"},
}

// printAttestations lists the SBOM and provenance attestations of an
// admitted image that its signer signed, each by the reference of the
// referrer carrying it; one signed by anyone else is not the signer's word
// and is left out. None is "none".
func (e *Env) printAttestations(ctx context.Context, w io.Writer, res imageCheck, t trust, tf trustFlags) error {
	if res.Signer == nil {
		return nil
	}
	kc, err := tf.keychain()
	if err != nil {
		return err
	}
	opts := append([]cosign.Option{cosign.WithInsecureRegistries(tf.insecure...), cosign.WithKeychain(kc)}, e.verifierOptions...)
	v, err := imagetrust.NewImageVerifier(t.policy, opts...)
	if err != nil {
		return exitf(ExitFailure, "image verifier: %w", err)
	}
	for _, k := range attestationKinds {
		found, _, err := v.VerifyAttestations(ctx, res.Ref, k.predicateType)
		if err != nil {
			fmt.Fprintf(w, "%s unknown: %s\n", k.label, display.Message(err.Error()))
			continue
		}
		var refs []string
		for _, a := range found {
			if res.Signer.Identity.Matches(a.Signer) {
				refs = append(refs, res.Ref.Name()+"@"+a.Referrer)
			}
		}
		if len(refs) == 0 {
			fmt.Fprintf(w, "%s none signed by %s\n", k.label, display.Text(res.Signer.Name))
			continue
		}
		for _, r := range refs {
			fmt.Fprintf(w, "%s %s (%s, signed by %s)\n", k.label, display.Text(r), k.format, display.Text(res.Signer.Name))
		}
	}
	return nil
}
