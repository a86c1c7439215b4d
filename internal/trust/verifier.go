package trust

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// maxSignedImages caps the signed-image cache, which drops the least
// recently checked image when full. An operator's reconciles check every
// running plugin's image, so the cache should hold every distinct image in
// use: 4,096 covers a cluster of thousands of plugins that share catalog
// images, at a few KB each.
const maxSignedImages = 4096

// Verification is the outcome of checking one image against the trust
// policy, already in the shape of the SignatureVerified condition (D-56).
type Verification struct {
	// Status is True when the image may run, False when it must not, and
	// Unknown when the registry could not be read (RegistryUnavailable) or
	// refused the read (RegistryUnauthorized).
	Status metav1.ConditionStatus
	// Reason is one of the SignatureVerified reasons in api/v1alpha1.
	Reason string
	// Message explains the outcome for a person.
	Message string
	// Signer names the trusted signer whose signature admitted the image.
	Signer string
}

// Verified reports whether the image may run.
func (v Verification) Verified() bool { return v.Status == metav1.ConditionTrue }

// ImageChecker decides whether an image may run; PolicyVerifier is the one
// the operator binary wires (D-57: there is no other).
type ImageChecker interface {
	Check(ctx context.Context, ref plugins.ImageRef, declared *plugins.Manifest) Verification
}

// PolicyVerifier checks images against the trust policy (D-42, D-45, D-56,
// D-57). It reads signatures through a cosign.ImageVerifier, caches signed
// images by digest (at most maxSignedImages, the least recently checked
// dropped first; an unsigned or unreadable result is never cached), and
// coalesces concurrent checks of one image into one registry round.
//
// Replace swaps the policy and its registry reader while checks run (the
// owner's signers changed live, OF-31): a check uses one policy from start
// to end, and the cache goes with the policy it was filled under, since
// which signatures the reader verifies depends on the keys the policy holds.
type PolicyVerifier struct {
	state  atomic.Pointer[verifierState]
	serial atomic.Uint64
	flight singleflight.Group
}

// verifierState is one policy with the reader of its keys and the signed
// images read through that reader.
type verifierState struct {
	serial uint64 // tells apart the states in the singleflight keys
	images cosign.ImageVerifier
	policy plugins.TrustPolicy
	cache  *lru.Cache // digest → plugins.SignedImage
}

// NewPolicyVerifier builds a PolicyVerifier over a registry reader and a trust policy.
func NewPolicyVerifier(images cosign.ImageVerifier, policy plugins.TrustPolicy) *PolicyVerifier {
	v := &PolicyVerifier{}
	v.Replace(images, policy)
	return v
}

// Replace makes every check that starts from now on use policy, reading
// signatures through images (built for policy, NewImageVerifier), with an
// empty cache. Checks already under way finish with the policy they began
// with.
func (v *PolicyVerifier) Replace(images cosign.ImageVerifier, policy plugins.TrustPolicy) {
	v.state.Store(&verifierState{serial: v.serial.Add(1), images: images, policy: policy, cache: lru.New(maxSignedImages)})
}

// Narrow is Replace for a policy that trusts no signer the current one does
// not (signers were only removed): it keeps the signed images cached so
// far. What they hold was verified, so it stays true; only the decision
// changes, and each check makes it again under policy. So an image whose
// only trusted signer was removed is refused as UntrustedSigner without a
// registry round, where a fresh read with fewer keys would find it unsigned.
// Narrowing towards a policy that trusts more would be wrong: the reader of
// fewer keys left out signatures and labels the new one needs.
func (v *PolicyVerifier) Narrow(images cosign.ImageVerifier, policy plugins.TrustPolicy) {
	cache := lru.New(maxSignedImages)
	if old := v.state.Load(); old != nil {
		cache = old.cache
	}
	v.state.Store(&verifierState{serial: v.serial.Add(1), images: images, policy: policy, cache: cache})
}

// Check decides whether ref may run with the declared manifest.
func (v *PolicyVerifier) Check(ctx context.Context, ref plugins.ImageRef, declared *plugins.Manifest) Verification {
	st := v.state.Load()
	signed, found, err := v.signedImage(ctx, st, ref)
	if err != nil {
		// A refused read wraps ErrRegistryUnavailable too: test it first.
		if errors.Is(err, cosign.ErrRegistryUnauthorized) {
			return Verification{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRegistryUnauthorized,
				Message: fmt.Sprintf("the registry refused the read of %s: the image is private and the credentials are missing or not accepted; "+
					"give OpenFief credentials for this registry (the operator's --registry-config file; for the CLI docker login or --registry-config) "+
					"or mirror the image to a registry that allows the read: %v", ref, err)}
		}
		if errors.Is(err, cosign.ErrRegistryUnavailable) {
			return Verification{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRegistryUnavailable,
				Message: fmt.Sprintf("cannot read %s from its registry: %v", ref, err)}
		}
		return Verification{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalidImage, Message: err.Error()}
	}
	res := decide(st.policy, signed, declared)
	if res.Reason == v1alpha1.ReasonUnsigned && found.unverified > 0 {
		// A reader holds only the trusted keys, so a signature by any other
		// key looks like none: say that there was one.
		res.Message += fmt.Sprintf("; %d %s attached to it did not verify with the trusted signers' keys and certificates: "+
			"it may be signed by a signer not trusted here", found.unverified, plural(found.unverified, "signature", "signatures"))
	}
	if res.Reason == v1alpha1.ReasonUnsigned && found.unverified == 0 && found.attestations > 0 {
		// cosign verify accepts an attestation as a signature; say why it
		// is not one here.
		res.Message += fmt.Sprintf("; it carries %d %s (such as an SBOM or provenance) and no signature: "+
			"an attestation is a statement about the image, not a signature of it", found.attestations, plural(found.attestations, "attestation", "attestations"))
	}
	if res.Reason == v1alpha1.ReasonUnsigned && found.legacy {
		res.Message += LegacySignatureHint
	}
	return res
}

// LegacySignatureHint ends the message of an image refused as unsigned that
// carries a signature in cosign's legacy format: what was found and how to
// sign in the format that is verified. It is fixed text: nothing the
// registry sent is in it.
const LegacySignatureHint = "; it carries a cosign signature in the legacy format (the sha256-<hex>.sig tag, simple signing), " +
	"which is not accepted: only Sigstore bundles are verified; sign it again with cosign v3 " +
	"without --new-bundle-format=false, such as offline with a key: " +
	"cosign sign --key cosign.key --tlog-upload=false --use-signing-config=false --yes IMAGE@sha256:<hex>"

// plural returns one when n is 1 and many otherwise.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// decide maps the trust policy's answer onto the condition.
func decide(policy plugins.TrustPolicy, signed plugins.SignedImage, declared *plugins.Manifest) Verification {
	d, err := policy.Decide(signed, declared)
	if err != nil {
		reason := v1alpha1.ReasonInvalidImage
		switch {
		case errors.Is(err, plugins.ErrUnsigned):
			reason = v1alpha1.ReasonUnsigned
		case errors.Is(err, plugins.ErrUntrustedSigner):
			reason = v1alpha1.ReasonUntrustedSigner
		case errors.Is(err, plugins.ErrManifestMismatch), errors.Is(err, plugins.ErrInvalidLabel):
			reason = v1alpha1.ReasonManifestMismatch
		}
		return Verification{Status: metav1.ConditionFalse, Reason: reason, Message: err.Error()}
	}
	if d.Level == plugins.Verified {
		return Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerified, Signer: d.Signer.Name,
			Message: verifiedPrefix + d.Signer.Name + verifiedSuffix}
	}
	return Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Signer: d.Signer.Name,
		Message: signedPrefix + d.Signer.Name + signedSuffix}
}

// The SignatureVerified messages of an admitted image name its signer
// between these; SignerFromMessage reads the name back.
const (
	verifiedPrefix = "signed by "
	verifiedSuffix = ", the catalog's publisher for this digest"
	signedPrefix   = "signed by trusted signer "
	signedSuffix   = "; not a verified catalog plugin"
)

// SignerFromMessage returns the signer a SignatureVerified condition of
// reason Verified or SignedByTrustedSigner names in its message, as Check
// writes it (the status has no field of its own for the current image's
// signer; status.deployed names only the running version's). It returns ""
// for any other reason or a message it does not recognise.
func SignerFromMessage(reason, message string) string {
	prefix, suffix := "", ""
	switch reason {
	case v1alpha1.ReasonVerified:
		prefix, suffix = verifiedPrefix, verifiedSuffix
	case v1alpha1.ReasonSignedByTrustedSigner:
		prefix, suffix = signedPrefix, signedSuffix
	default:
		return ""
	}
	rest, ok := strings.CutPrefix(message, prefix)
	if !ok {
		return ""
	}
	// A name that holds the suffix itself would be ambiguous: fail closed.
	if strings.Count(rest, suffix) != 1 {
		return ""
	}
	name, _, _ := strings.Cut(rest, suffix)
	return name
}

// notCounted is what an image read now carried besides the signatures that
// verified.
type notCounted struct {
	// unverified is how many signature bundles did not verify (a key or
	// certificate the state does not trust, or a bad signature).
	unverified int
	// attestations is how many bundles were statements of another type
	// than a signature (an SBOM, provenance), verified or not: never
	// counted as signatures.
	attestations int
	// legacy is whether a signature in cosign's legacy format was found.
	legacy bool
}

// signedImage returns the verified signatures and label of ref's digest
// under st, from st's cache when an earlier check found it signed, and, for
// an image read now, what it carried that did not count. Checks of one image
// under one state share a registry round; under different states they do
// not, so no check sees signatures read with other keys.
func (v *PolicyVerifier) signedImage(ctx context.Context, st *verifierState, ref plugins.ImageRef) (plugins.SignedImage, notCounted, error) {
	if img, ok := st.cache.Get(ref.Digest()); ok {
		return img.(plugins.SignedImage), notCounted{}, nil
	}
	type read struct {
		img   plugins.SignedImage
		found notCounted
	}
	key := strconv.FormatUint(st.serial, 10) + " " + ref.String()
	res, err, _ := v.flight.Do(key, func() (any, error) {
		img, rep, err := st.images.Verify(ctx, ref)
		if err != nil {
			return read{}, err
		}
		if len(img.Signatures) > 0 {
			st.cache.Add(ref.Digest(), img)
		}
		r := read{img: img, found: notCounted{legacy: rep.LegacySignature}}
		for _, s := range rep.Skipped {
			switch {
			case errors.Is(s.Reason, cosign.ErrUnverifiedBundle):
				r.found.unverified++
			case errors.Is(s.Reason, cosign.ErrPredicateType):
				r.found.attestations++
			}
		}
		return r, nil
	})
	if err != nil {
		return plugins.SignedImage{}, notCounted{}, err
	}
	r := res.(read)
	return r.img, r.found, nil
}
