package cli

import (
	"context"
	"errors"
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
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	imagetrust "github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// trustFlags are the flags of the commands that check an image: the owner's
// signers, the registries read over plain HTTP and the registry
// credentials.
type trustFlags struct {
	signersFile    string
	insecure       []string
	registryConfig string
}

func (f *trustFlags) register(fs *pflag.FlagSet, clusterDefault bool) {
	help := "the owner's trusted signers, a signers.json file as in the openfief-trusted-signers ConfigMap"
	if clusterDefault {
		help += " (default: that ConfigMap's signers.json in the cluster, as the operator trusts)"
	}
	fs.StringVar(&f.signersFile, "signers", "", help)
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

// trust is a loaded trust policy and where its owner signers came from.
type trust struct {
	policy plugins.TrustPolicy
	// source names where the owner's signers came from, for the report.
	source string
}

// policyFromFile builds the operator's trust policy with the owner signers
// of file (D-45), through the same trust.LoadPolicy the operator uses. Unlike
// the operator, a file the owner names must exist.
func policyFromFile(file string) (trust, error) {
	if file != "" {
		if _, err := os.Stat(file); err != nil {
			return trust{}, exitf(ExitUsage, "--signers: %w", err)
		}
	}
	p, err := imagetrust.LoadPolicy(file)
	if err != nil {
		return trust{}, exitf(ExitInvalid, "--signers: %w", err)
	}
	source := "no owner signers"
	if file != "" {
		source = "owner signers from " + file
	}
	return trust{policy: p, source: source}, nil
}

// policyFromCluster builds the trust policy the operator holds: OpenFief's
// CI, the embedded catalog and the signers.json of the
// openfief-trusted-signers ConfigMap, which may be missing.
func policyFromCluster(ctx context.Context, c client.Client, namespace string) (trust, error) {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: plugins.OwnerSignersConfigMap}, &cm)
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
	p, err := imagetrust.NewPolicy(owner)
	if err != nil {
		return trust{}, exitf(ExitInvalid, "ConfigMap %s: %w", plugins.OwnerSignersConfigMap, err)
	}
	return trust{policy: p, source: source}, nil
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
