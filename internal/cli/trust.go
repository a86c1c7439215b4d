package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/platform"
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
	catalogHelp := "a release's catalog, its plugins.json (default: this CLI's built-in catalog"
	if clusterDefault {
		catalogHelp = "a release's catalog, its plugins.json (default: the installed release's, from ConfigMap " + deploy.ReleaseConfigMap + ", else this CLI's built-in one"
	}
	fs.StringVar(&f.catalogFile, "catalog-file", "", catalogHelp+"; the operator decides with the catalog built into it)")
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
	// owner is the owner's signers.json the policy holds, if any.
	owner []byte
}

// policyFromFile builds the operator's trust policy with the owner signers
// of file (D-45), as trust.LoadPolicy reads them for the operator, and the
// catalog of catalogFile, else this binary's. Unlike the operator, a file
// the owner names must exist.
func policyFromFile(file, catalogFile string) (trust, error) {
	cat, catSource, err := catalogFromFile(catalogFile)
	if err != nil {
		return trust{}, err
	}
	var owner []byte
	source := "no owner signers"
	if file != "" {
		if owner, err = readBounded(file, maxSignersFile); err != nil {
			return trust{}, exitf(ExitUsage, "--signers: %w", err)
		}
		source = "owner signers from " + file
	}
	p, err := imagetrust.NewPolicyWithCatalog(cat, owner)
	if err != nil {
		return trust{}, exitf(ExitInvalid, "--signers: %w", err)
	}
	return trust{policy: p, source: source, catalog: catSource, owner: owner}, nil
}

// maxSignersFile bounds a signers.json or plugins.json read from disk; the
// domain refuses either when it is longer than it allows.
const maxSignersFile = 1 << 20

// readBounded reads at most limit bytes of file and refuses a longer one.
func readBounded(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is longer than %d bytes", file, limit)
	}
	return data, nil
}

// catalogFromFile reads the catalog of file, a release's plugins.json, or
// returns this binary's when file is empty.
func catalogFromFile(file string) (plugins.Catalog, string, error) {
	if file == "" {
		cat, err := catalog.Load()
		if err != nil {
			return plugins.Catalog{}, "", exitf(ExitFailure, "this CLI's built-in catalog: %w", err)
		}
		return cat, builtinCatalogSource(cat), nil
	}
	data, err := readBounded(file, maxSignersFile)
	if err != nil {
		return plugins.Catalog{}, "", exitf(ExitUsage, "--catalog-file: %w", err)
	}
	cat, err := plugins.ParseCatalog(data)
	if err != nil {
		return plugins.Catalog{}, "", exitf(ExitInvalid, "--catalog-file %s: %w", file, err)
	}
	return cat, fmt.Sprintf("catalog from %s (%d plugins)", file, cat.Len()), nil
}

func builtinCatalogSource(cat plugins.Catalog) string {
	return fmt.Sprintf("this CLI's built-in catalog (%d plugins)", cat.Len())
}

// installedCatalog is the catalog of the installed release: the ConfigMap
// deploy.ReleaseConfigMap's deploy.ReleaseKeyCatalog, with the release's
// version; found is false when the cluster has no such ConfigMap or key.
func installedCatalog(ctx context.Context, c client.Client, namespace string) (cat plugins.Catalog, version string, found bool, err error) {
	var cm corev1.ConfigMap
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deploy.ReleaseConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return plugins.Catalog{}, "", false, nil
	case err != nil:
		return plugins.Catalog{}, "", false, exitf(ExitFailure, "reading ConfigMap %s: %w", deploy.ReleaseConfigMap, err)
	}
	data, ok := cm.Data[deploy.ReleaseKeyCatalog]
	if !ok {
		return plugins.Catalog{}, "", false, nil
	}
	if cat, err = plugins.ParseCatalog([]byte(data)); err != nil {
		return plugins.Catalog{}, "", false, exitf(ExitInvalid, "ConfigMap %s, key %s: %w", deploy.ReleaseConfigMap, deploy.ReleaseKeyCatalog, err)
	}
	return cat, cm.Labels[platform.LabelVersion], true, nil
}

// catalogFor is the catalog a command that reaches the cluster checks
// images with: --catalog-file's, else the installed release's, else this
// binary's.
func catalogFor(ctx context.Context, c client.Client, namespace, file string) (plugins.Catalog, string, error) {
	if file != "" {
		return catalogFromFile(file)
	}
	cat, version, found, err := installedCatalog(ctx, c, namespace)
	if err != nil {
		return plugins.Catalog{}, "", err
	}
	if !found {
		return catalogFromFile("")
	}
	return cat, fmt.Sprintf("catalog of the installed release %s (ConfigMap %s, %d plugins)", orDash(version), deploy.ReleaseConfigMap, cat.Len()), nil
}

// policyFromCluster builds the trust policy the operator holds: OpenFief's
// CI, the installed release's catalog (or --catalog-file's) and the
// signers.json of the openfief-trusted-signers ConfigMap, which may be
// missing.
func policyFromCluster(ctx context.Context, c client.Client, namespace, catalogFile string) (trust, error) {
	cat, catSource, err := catalogFor(ctx, c, namespace, catalogFile)
	if err != nil {
		return trust{}, err
	}
	var cm corev1.ConfigMap
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: plugins.OwnerSignersConfigMap}, &cm)
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
	return trust{policy: p, source: source, catalog: catSource, owner: owner}, nil
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
	opts := append([]cosign.Option{cosign.WithInsecureRegistries(tf.insecure...), cosign.WithKeychain(kc)}, e.verifierOptions...)
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
