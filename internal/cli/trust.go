package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	imagetrust "github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// trustFlags are the flags of the commands that check an image: the owner's
// signers, the registries read over plain HTTP and the registry
// credentials.
type trustFlags struct {
	signersFile    string
	catalogFile    string
	insecure       []string
	registryConfig string
}

func (f *trustFlags) register(fs *pflag.FlagSet, clusterDefault bool) {
	help := "the owner's trusted signers, a signers.json file as in the openfief-trusted-signers ConfigMap"
	if clusterDefault {
		help += " (default: that ConfigMap's signers.json in the cluster, as the operator trusts)"
	}
	fs.StringVar(&f.signersFile, "signers", "", help)
	fs.StringVar(&f.catalogFile, "catalog-file", "", "a release's catalog, its plugins.json, used only with the release's signature beside it (FILE"+plugins.CatalogSignatureSuffix+") by OpenFief's CI or a publisher of this CLI's own catalog (default: this CLI's built-in catalog, the one its release built into the operator)")
	f.registerRegistry(fs)
}

// registerRegistry registers only the flags that say how registries are
// read: --insecure-registry and --registry-config.
func (f *trustFlags) registerRegistry(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.insecure, "insecure-registry", insecureFromEnv(), "a registry host[:port] read over plain HTTP (repeatable; loopback registries always are; default: $"+EnvInsecureRegistries+", comma-separated)")
	fs.StringVar(&f.registryConfig, "registry-config", "", "a docker config.json with registry credentials (default: the owner's docker config, ~/.docker/config.json or $DOCKER_CONFIG, with its credential helpers, as crane and cosign read it)")
}

// EnvInsecureRegistries names registries read over plain HTTP when no
// --insecure-registry is given: comma-separated host[:port]. `openfief dev
// --in-cluster` writes it, since its plugin registry listens on the node's
// bridge address, where the operator's pod reaches it.
const EnvInsecureRegistries = "OPENFIEF_INSECURE_REGISTRIES"

// insecureFromEnv is --insecure-registry's default, from
// EnvInsecureRegistries.
func insecureFromEnv() []string {
	var out []string
	for _, h := range strings.Split(os.Getenv(EnvInsecureRegistries), ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// keychain is where the registry credentials come from: the file of
// --registry-config, or the owner's docker config as crane and cosign read
// it (go-containerregistry's default keychain).
func (f *trustFlags) keychain() (authn.Keychain, error) {
	if f.registryConfig == "" {
		return authn.DefaultKeychain, nil
	}
	if _, err := os.Stat(f.registryConfig); err != nil {
		return nil, exitf(ExitUsage, "--registry-config: %w", err)
	}
	kc, err := cosign.NewFileKeychain(f.registryConfig)
	if err != nil {
		return nil, exitf(ExitInvalid, "--registry-config: %w", err)
	}
	return kc, nil
}

// trust is a loaded trust policy and where its owner signers and its
// catalog came from.
type trust struct {
	policy plugins.TrustPolicy
	// source names where the owner's signers came from, for the report.
	source string
	// catalog names where the catalog came from, for the report.
	catalog string
	// version is the release the catalog is of, "" when unknown (a
	// development build's).
	version string
	// owner is the owner's signers.json the policy holds, if any.
	owner []byte
	// sigstore is the cluster's Sigstore root (nil: the embedded one) and
	// sigstoreNote names it for the report ("" without the ConfigMap).
	sigstore     root.TrustedMaterial
	sigstoreNote string
}

// policyFromFile builds the operator's trust policy with the owner signers
// of file (D-45), as trust.LoadPolicy reads them for the operator, and the
// catalog of catalogFile (verified, catalogFromFile), else this binary's.
// Unlike the operator, a file the owner names must exist.
func (e *Env) policyFromFile(file, catalogFile string) (trust, error) {
	if file == "" {
		return e.policyFromBytes(nil, "no owner signers", catalogFile)
	}
	owner, err := boundedfile.Read(file, maxSignersFile)
	if err != nil {
		return trust{}, exitf(ExitUsage, "--signers: %w", err)
	}
	return e.policyFromBytes(owner, "owner signers from "+file, catalogFile)
}

// policyFromBytes builds the trust policy with the owner signers of owner
// (a signers.json; nil for none), which source names for the report, and
// the catalog of catalogFile as policyFromFile does.
func (e *Env) policyFromBytes(owner []byte, source, catalogFile string) (trust, error) {
	cat, catSource, version, err := e.catalogFromFile(catalogFile)
	if err != nil {
		return trust{}, err
	}
	p, err := imagetrust.NewPolicyWithCatalog(cat, owner)
	if err != nil {
		return trust{}, exitf(ExitInvalid, "--signers: %w", err)
	}
	return trust{policy: p, source: source, catalog: catSource, version: version, owner: owner}, nil
}

// maxSignersFile bounds a signers.json or plugins.json read from disk; the
// domain refuses either when it is longer than it allows.
const maxSignersFile = 1 << 20

// catalogFromFile is the catalog the CLI checks images with: this binary's
// (linked in by its release, as into that release's operator; OF-30) when
// file is empty, else file, a release's plugins.json, used only when the
// Sigstore bundle beside it (file + plugins.CatalogSignatureSuffix)
// verifies for exactly its bytes and was signed by a publisher this binary
// knows (catalogSigners). No cluster object is ever read for the catalog,
// so no ConfigMap can make the CLI say Verified when the operator would
// not.
func (e *Env) catalogFromFile(file string) (cat plugins.Catalog, source, version string, err error) {
	builtin, version, err := e.builtin()
	if err != nil {
		return plugins.Catalog{}, "", "", err
	}
	if file == "" {
		return builtin, builtinCatalogSource(builtin, version), version, nil
	}
	data, err := boundedfile.Read(file, maxSignersFile)
	if err != nil {
		return plugins.Catalog{}, "", "", exitf(ExitUsage, "--catalog-file: %w", err)
	}
	sigFile := file + plugins.CatalogSignatureSuffix
	sig, err := boundedfile.Read(sigFile, cosign.MaxBundleBytes)
	if err != nil {
		return plugins.Catalog{}, "", "", exitf(ExitUntrustedSigner, "--catalog-file %s: its signature %s: %w; a release's catalog is used only with the signature the release wrote beside it", file, sigFile, err)
	}
	signer, signedVersion, err := e.verifyCatalogFile(data, sig, builtin)
	if err != nil {
		return plugins.Catalog{}, "", "", exitf(ExitUntrustedSigner, "--catalog-file %s: %w: refused", file, err)
	}
	cat, err = plugins.ParseCatalog(data)
	if err != nil {
		return plugins.Catalog{}, "", "", exitf(ExitInvalid, "--catalog-file %s: %w", file, err)
	}
	return cat, fmt.Sprintf("the catalog of release %s from %s, signed by %s (%d plugins)", orDash(signedVersion), file, signer, cat.Len()), signedVersion, nil
}

// builtin is this binary's catalog and the release it was built by ("" in
// a development build).
func (e *Env) builtin() (plugins.Catalog, string, error) {
	if e.builtinCatalog != nil {
		cat, err := plugins.ParseCatalog(e.builtinCatalog)
		if err != nil {
			return plugins.Catalog{}, "", exitf(ExitFailure, "this CLI's built-in catalog: %w", err)
		}
		return cat, testRelease, nil
	}
	cat, err := catalog.Load()
	if err != nil {
		return plugins.Catalog{}, "", exitf(ExitFailure, "this CLI's built-in catalog: %w", err)
	}
	return cat, catalog.Version(), nil
}

// testRelease is the version a test's stand-in for a release's catalog
// (Env.builtinCatalog) is of.
const testRelease = "v0.0.0-test"

func builtinCatalogSource(cat plugins.Catalog, version string) string {
	if version == "" {
		return fmt.Sprintf("this CLI's built-in catalog, of a development build (%d plugins)", cat.Len())
	}
	return fmt.Sprintf("this CLI's built-in catalog, of release %s (%d plugins)", version, cat.Len())
}

// catalogSigners are who may sign a catalog file this binary uses:
// OpenFief's CI and the publishers of the binary's own catalog (a release
// signed with a key names that key). The owner's signers are not among
// them: a catalog the owner signed would make the CLI say Verified where
// the operator, with its compiled-in catalog, does not.
func catalogSigners(builtin plugins.Catalog) []plugins.Signer {
	signers := []plugins.Signer{plugins.OpenFiefCI()}
	for _, e := range builtin.Entries() {
		if !slices.ContainsFunc(signers, func(s plugins.Signer) bool { return s.Identity == e.Publisher.Identity }) {
			signers = append(signers, e.Publisher)
		}
	}
	return signers
}

// verifyCatalogFile verifies sig, a Sigstore bundle, over data for one of
// catalogSigners(builtin) and returns that signer's name and the release
// version the signature names.
func (e *Env) verifyCatalogFile(data, sig []byte, builtin plugins.Catalog) (string, string, error) {
	signers := catalogSigners(builtin)
	var keys []string
	for _, s := range signers {
		if s.Identity.IsKey() {
			keys = append(keys, s.Identity.PublicKeyPEM)
		}
	}
	opts := append([]cosign.Option{cosign.WithPublicKeys(keys)}, e.verifierOptions...)
	id, pred, err := cosign.VerifyFile(sig, data, plugins.CatalogPredicateType, opts...)
	if err != nil {
		return "", "", fmt.Errorf("its signature does not verify for this file: %w", err)
	}
	for _, s := range signers {
		if s.Identity.Matches(id) {
			var p struct {
				Version string `json:"version"`
			}
			_ = json.Unmarshal(pred, &p)
			return s.Name, p.Version, nil
		}
	}
	var names []string
	for _, s := range signers {
		names = append(names, s.Name)
	}
	return "", "", fmt.Errorf("signed by %s, who is not a publisher this CLI knows (%s)", describeSignature(id), strings.Join(names, ", "))
}

// describeSignature says who made a signature; all of it is public.
func describeSignature(id plugins.SignatureIdentity) string {
	if id.PublicKeyPEM != "" {
		return "a public key"
	}
	return display.Text(fmt.Sprintf("issuer %s, subject %s", id.Issuer, id.Subject))
}

// policyFromCluster builds the trust policy the operator holds: OpenFief's
// CI, this binary's catalog (or --catalog-file's, verified) and the
// signers.json of the openfief-trusted-signers ConfigMap, which may be
// missing.
func (e *Env) policyFromCluster(ctx context.Context, c client.Client, catalogFile string) (trust, error) {
	cat, catSource, version, err := e.catalogFromFile(catalogFile)
	if err != nil {
		return trust{}, err
	}
	var cm corev1.ConfigMap
	err = c.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: plugins.OwnerSignersConfigMap}, &cm)
	source := "owner signers from ConfigMap " + plugins.OwnerSignersConfigMap
	var owner []byte
	switch {
	case apierrors.IsNotFound(err):
		source = "no owner signers (no ConfigMap " + plugins.OwnerSignersConfigMap + ")"
	case err != nil:
		return trust{}, exitf(ExitFailure, "reading the trusted signers: %w", err)
	default:
		data, ok := cm.Data[plugins.OwnerSignersKey]
		if !ok {
			source = "no owner signers (ConfigMap " + plugins.OwnerSignersConfigMap + " has no " + plugins.OwnerSignersKey + ")"
			break
		}
		owner = []byte(data)
	}
	p, err := imagetrust.NewPolicyWithCatalog(cat, owner)
	if err != nil {
		return trust{}, exitf(ExitInvalid, "ConfigMap %s: %w", plugins.OwnerSignersConfigMap, err)
	}
	sigstore, note, err := e.sigstoreRootFromCluster(ctx, c)
	if err != nil {
		return trust{}, err
	}
	return trust{policy: p, source: source, catalog: catSource, version: version, owner: owner, sigstore: sigstore, sigstoreNote: note}, nil
}

// imageCheck is the outcome of the operator's check of one image, with what
// the registry showed: the signed label and the bundles that did not count.
type imageCheck struct {
	Ref          plugins.ImageRef
	Verification imagetrust.Verification
	// Manifest is the signed label, set only when the image passed.
	Manifest *plugins.Manifest
	// Report says which referrers were read and which bundles were skipped.
	Report cosign.Report
	// Signer is the trusted signer that admitted the image.
	Signer *plugins.Signer
	// labelInvalid says the registry read failed on the manifest label,
	// which the operator reports as InvalidImage.
	labelInvalid bool
}

// parseImage reads an image reference pinned by digest (D-17).
func parseImage(flag, image string) (plugins.ImageRef, error) {
	ref, err := plugins.ParseImageRef(image)
	if err != nil {
		return plugins.ImageRef{}, exitf(ExitInvalidImage, "%s: %w", flag, err)
	}
	return ref, nil
}

// checkImage runs the operator's PolicyVerifier on ref without a declared
// manifest, so it admits or refuses the image on its signatures, and
// returns the signed label of an admitted one (D-42, D-56, D-57).
func (e *Env) checkImage(ctx context.Context, ref plugins.ImageRef, t trust, tf trustFlags) (imageCheck, error) {
	kc, err := tf.keychain()
	if err != nil {
		return imageCheck{}, err
	}
	opts := []cosign.Option{cosign.WithInsecureRegistries(tf.insecure...), cosign.WithKeychain(kc)}
	if t.sigstore != nil {
		opts = append(opts, cosign.WithTrustedMaterial(t.sigstore))
	}
	opts = append(opts, e.verifierOptions...)
	v, err := imagetrust.NewImageVerifier(t.policy, opts...)
	if err != nil {
		return imageCheck{}, exitf(ExitFailure, "image verifier: %w", err)
	}
	rec := &recordingImages{inner: v}
	res := imageCheck{Ref: ref, Verification: imagetrust.NewPolicyVerifier(rec, t.policy).Check(ctx, ref, nil)}
	res.Report = rec.report
	res.labelInvalid = errors.Is(rec.err, plugins.ErrInvalidLabel)
	if res.Verification.Verified() {
		res.Manifest = rec.signed.Manifest
		for _, s := range t.policy.Signers() {
			if s.Name == res.Verification.Signer {
				res.Signer = &s
				break
			}
		}
	}
	return res, nil
}

// refusal turns a check that did not admit the image, or admitted one
// without a manifest label, into the error with its exit code.
func (c imageCheck) refusal() error {
	v := c.Verification
	switch {
	case v.Status == metav1.ConditionUnknown && v.Reason == v1alpha1.ReasonRegistryUnauthorized:
		return exitf(ExitRegistryUnauthorized, "%s: %s", display.Text(v.Reason), display.Message(v.Message))
	case v.Status == metav1.ConditionUnknown:
		return exitf(ExitRegistryUnavailable, "%s: %s", display.Text(v.Reason), display.Message(v.Message))
	case v.Status != metav1.ConditionTrue:
		code := ExitInvalidImage
		switch v.Reason {
		case v1alpha1.ReasonUnsigned:
			code = ExitUnsigned
		case v1alpha1.ReasonUntrustedSigner:
			code = ExitUntrustedSigner
		case v1alpha1.ReasonManifestMismatch:
			code = ExitManifestMismatch
		}
		if c.labelInvalid {
			code = ExitManifestMismatch
		}
		return exitf(code, "image refused: %s: %s", display.Text(v.Reason), display.Message(v.Message))
	case c.Manifest == nil:
		return exitf(ExitManifestMismatch, "image refused: %s: the image has no %s label, so the operator cannot run it",
			v1alpha1.ReasonManifestMismatch, plugins.ManifestLabel)
	}
	return nil
}

// recordingImages passes verifications through and keeps the last result,
// so the CLI can show the signed label and skipped bundles the
// PolicyVerifier does not return.
type recordingImages struct {
	inner  cosign.ImageVerifier
	mu     sync.Mutex
	signed plugins.SignedImage
	report cosign.Report
	err    error
}

// Verify implements cosign.ImageVerifier.
func (r *recordingImages) Verify(ctx context.Context, ref plugins.ImageRef) (plugins.SignedImage, cosign.Report, error) {
	img, rep, err := r.inner.Verify(ctx, ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signed, r.report, r.err = img, rep, err
	return img, rep, err
}
