package dashboard

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Tones say how a cell reads at a glance. They become CSS classes, so they
// come from this fixed set and never from a resource; each is also said in
// words and with a symbol, never by colour alone.
const (
	toneVerified = "verified"
	toneSigned   = "signed"
	toneRefused  = "refused"
	toneUnknown  = "unknown"
	tonePending  = "pending"
	toneOK       = "ok"
)

// signatureWords are the SignatureVerified reasons in words (D-56). Verified
// and SignedByTrustedSigner start differently and carry different symbols,
// so an owner cannot take one for the other.
var signatureWords = map[string]struct{ text, detail, tone string }{
	v1alpha1.ReasonVerified:              {"✔ Verified", "in the catalog, signed by its publisher", toneVerified},
	v1alpha1.ReasonSignedByTrustedSigner: {"◐ Signed, not verified", "a trusted signer; not in the catalog", toneSigned},
	v1alpha1.ReasonUnsigned:              {"✖ Refused: unsigned", "no signature verifies", toneRefused},
	v1alpha1.ReasonUntrustedSigner:       {"✖ Refused: untrusted signer", "signed, but by no one trusted", toneRefused},
	v1alpha1.ReasonManifestMismatch:      {"✖ Refused: manifest mismatch", "the request differs from the signed label", toneRefused},
	v1alpha1.ReasonInvalidImage:          {"✖ Refused: invalid image", "no readable image under this digest", toneRefused},
	v1alpha1.ReasonRegistryUnavailable:   {"? Unknown: registry unavailable", "retrying; nothing new deploys", toneUnknown},
	v1alpha1.ReasonRegistryUnauthorized:  {"? Unknown: registry refused access", "the image is private; retrying", toneUnknown},
	v1alpha1.ReasonInvalidSpec:           {"? Not checked: invalid spec", "fix the Plugin first", toneUnknown},
}

// signatureCell describes the SignatureVerified reason; one the dashboard
// does not know is shown as it is, as unknown.
func signatureCell(reason string) Cell {
	if reason == "" {
		return Cell{Text: "? Not checked yet", Detail: "the operator has not written it", Tone: toneUnknown}
	}
	w, ok := signatureWords[reason]
	if !ok {
		return Cell{Text: "? " + reason, Detail: "a reason this dashboard does not know", Tone: toneUnknown}
	}
	return Cell{Text: w.text, Detail: w.detail + " (" + reason + ")", Tone: w.tone}
}

// kindWords names D-45's three kinds of trusted signer.
var kindWords = map[plugins.SignerKind]string{
	plugins.SignerOpenFiefCI: "OpenFief CI",
	plugins.SignerPublisher:  "Catalog publisher",
	plugins.SignerOwner:      "Owner's signer",
}

// signerCell names a signer with its kind and identity, looked up by name
// in the trust policy the operator holds. A name the policy does not hold is
// said so, never guessed (fail closed).
func signerCell(name string, policy *plugins.TrustPolicy) Cell {
	if name == "" {
		return Cell{Text: "—", Detail: "no trusted signer"}
	}
	if policy != nil {
		for _, s := range policy.Signers() {
			if s.Name == name {
				return Cell{Text: name, Detail: kindWords[s.Kind] + ": " + describeIdentity(s.Identity)}
			}
		}
	}
	return Cell{Text: name, Detail: "kind unknown: not in the trust policy this dashboard read", Tone: toneUnknown}
}

// describeIdentity says how a signer is identified: issuer and subject, or
// the SHA-256 fingerprint of its public key. All of it is public.
func describeIdentity(id plugins.SignerIdentity) string {
	switch {
	case id.IsKey():
		block, _ := pem.Decode([]byte(id.PublicKeyPEM))
		if block == nil {
			return "public key"
		}
		if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
			return "public key"
		}
		sum := sha256.Sum256(block.Bytes)
		return "public key SHA256:" + hex.EncodeToString(sum[:])[:16]
	case id.SubjectPattern != "":
		return fmt.Sprintf("issuer %s, subject matching %s", id.Issuer, id.SubjectPattern)
	default:
		return fmt.Sprintf("issuer %s, subject %s", id.Issuer, id.Subject)
	}
}
