package cosign

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	sigstoretuf "github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata/trustedmetadata"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TrustRoot is a Sigstore trusted root the verifier may check keyless
// bundles with, the TUF root metadata it was verified through, and where it
// came from. The zero value is not usable: start from EmbeddedTrustRoot or
// NewStartTrustRoot, and move on with Update.
type TrustRoot struct {
	// Material is the parsed trusted_root.json (WithTrustedMaterial).
	Material *root.TrustedRoot
	// Status says where it came from and names it by digest, as the
	// operator publishes it; Refused is never set here.
	Status plugins.TrustRootStatus
	// tufRoot is the TUF root metadata the next Update starts from.
	tufRoot []byte
	// timestampVersion is the TUF timestamp version Material was verified
	// through (0 for a start), below which no Update goes.
	timestampVersion int64
}

// EmbeddedTrustRoot is what the verifier trusts when no admin has installed
// another root: the public-good instance's trusted_root.json this binary
// embeds, and as the start of any Update the public-good instance's TUF
// root metadata that sigstore-go, pinned in go.mod, embeds (its
// DefaultRoot).
func EmbeddedTrustRoot() (TrustRoot, error) {
	return NewStartTrustRoot(sigstoretuf.DefaultRoot(), publicGoodRoot)
}

// NewStartTrustRoot is a TrustRoot that trusts trustedRootJSON as given and
// whose Updates start from the TUF root metadata tufRoot. The binary starts
// from EmbeddedTrustRoot; tests start from their own TUF repository and
// virtual Sigstore.
func NewStartTrustRoot(tufRoot, trustedRootJSON []byte) (TrustRoot, error) {
	if _, err := trustedmetadata.New(tufRoot); err != nil {
		return TrustRoot{}, fmt.Errorf("the TUF root to start from: %w", err)
	}
	tr, err := root.NewTrustedRootFromJSON(trustedRootJSON)
	if err != nil {
		return TrustRoot{}, fmt.Errorf("parse the embedded trusted root: %w", err)
	}
	return TrustRoot{
		Material: tr,
		Status:   plugins.TrustRootStatus{Source: plugins.TrustRootEmbedded, SHA256: sha256Hex(trustedRootJSON)},
		tufRoot:  tufRoot,
	}, nil
}

// ErrTrustRootRefused means the admin's trust root did not verify against the
// root trusted now, or is not one keyless bundles could be verified with.
var ErrTrustRootRefused = errors.New("trust root refused")

// Update verifies files, the content of the admin's ConfigMap with the
// fingerprint configMap, offline, starting from the TUF root metadata t was
// verified through, as a TUF client would after downloading them:
//
//   - each root version after t's, in order, is signed by a threshold of
//     the previous root's root keys and of its own (the rotation chain);
//     versions up to t's are skipped, a gap is refused;
//   - timestamp.json is signed by the final root's timestamp keys and is
//     not older than the one t was verified through;
//   - snapshot.json matches the timestamp's hash and version and is signed
//     by the snapshot keys; targets.json matches the snapshot's and is
//     signed by the targets keys;
//   - trusted_root.json has the length and hashes targets.json records for
//     it, parses, and holds at least one Fulcio CA and one transparency log
//     whose validity covers now.
//
// The metadata's expiry dates are not checked (a TUF client's freshness
// needs its own download; here the admin chose when to copy them): the
// validity windows of the CAs and logs in trusted_root.json still bound
// every signature. The result starts the next Update. Errors wrap
// ErrTrustRootRefused and name the file.
func (t TrustRoot) Update(files plugins.TrustRootFiles, configMap string, now time.Time) (TrustRoot, error) {
	if t.tufRoot == nil {
		return TrustRoot{}, fmt.Errorf("%w: no TUF root to start from", ErrTrustRootRefused)
	}
	trusted, err := trustedmetadata.New(t.tufRoot)
	if err != nil {
		return TrustRoot{}, fmt.Errorf("%w: the TUF root trusted now: %w", ErrTrustRootRefused, err)
	}
	// The zero reference time is after no expiry date: see above.
	trusted.RefTime = time.Time{}
	rootBytes := t.tufRoot
	for i, raw := range files.Roots {
		v := files.RootVersions[i]
		if v <= trusted.Root.Signed.Version {
			continue
		}
		if _, err := trusted.UpdateRoot(raw); err != nil {
			return TrustRoot{}, refused(fmt.Sprintf("%d.root.json", v), err)
		}
		if trusted.Root.Signed.Version != v {
			return TrustRoot{}, refused(fmt.Sprintf("%d.root.json", v), fmt.Errorf("holds root version %d", trusted.Root.Signed.Version))
		}
		rootBytes = raw
	}
	ts, err := trusted.UpdateTimestamp(files.Timestamp)
	if err != nil {
		return TrustRoot{}, refused(plugins.TrustRootTimestampKey, err)
	}
	if ts.Signed.Version < t.timestampVersion {
		return TrustRoot{}, refused(plugins.TrustRootTimestampKey,
			fmt.Errorf("version %d is older than version %d, which the root in use was verified through", ts.Signed.Version, t.timestampVersion))
	}
	if _, err := trusted.UpdateSnapshot(files.Snapshot, false); err != nil {
		return TrustRoot{}, refused(plugins.TrustRootSnapshotKey, err)
	}
	targets, err := trusted.UpdateTargets(files.Targets)
	if err != nil {
		return TrustRoot{}, refused(plugins.TrustRootTargetsKey, err)
	}
	target, ok := targets.Signed.Targets[plugins.TrustRootTargetKey]
	if !ok {
		return TrustRoot{}, refused(plugins.TrustRootTargetsKey, fmt.Errorf("names no target %s", plugins.TrustRootTargetKey))
	}
	if err := target.VerifyLengthHashes(files.TrustedRoot); err != nil {
		return TrustRoot{}, refused(plugins.TrustRootTargetKey, fmt.Errorf("not the file targets.json signed: %w", err))
	}
	tr, err := root.NewTrustedRootFromJSON(files.TrustedRoot)
	if err != nil {
		return TrustRoot{}, refused(plugins.TrustRootTargetKey, err)
	}
	if err := usable(tr, now); err != nil {
		return TrustRoot{}, refused(plugins.TrustRootTargetKey, err)
	}
	return TrustRoot{
		Material: tr,
		Status: plugins.TrustRootStatus{
			Source:         plugins.TrustRootFromConfigMap,
			SHA256:         sha256Hex(files.TrustedRoot),
			ConfigMap:      configMap,
			RootVersion:    trusted.Root.Signed.Version,
			TargetsVersion: targets.Signed.Version,
		},
		tufRoot:          rootBytes,
		timestampVersion: ts.Signed.Version,
	}, nil
}

// usable requires a Fulcio CA and a transparency log valid at now: without
// them no new keyless signature could verify, which is no root to switch to.
func usable(tr *root.TrustedRoot, now time.Time) error {
	ca := false
	for _, c := range tr.FulcioCertificateAuthorities() {
		if f, ok := c.(*root.FulcioCertificateAuthority); ok && within(now, f.ValidityPeriodStart, f.ValidityPeriodEnd) {
			ca = true
		}
	}
	if !ca {
		return errors.New("no Fulcio certificate authority valid now")
	}
	for _, l := range tr.RekorLogs() {
		if within(now, l.ValidityPeriodStart, l.ValidityPeriodEnd) {
			return nil
		}
	}
	return errors.New("no transparency log valid now")
}

// within is the validity rule of trusted_root.json: a zero end is open.
func within(now, start, end time.Time) bool {
	return !now.Before(start) && (end.IsZero() || now.Before(end))
}

// refused wraps a verification failure of file.
func refused(file string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrTrustRootRefused, file, err)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
