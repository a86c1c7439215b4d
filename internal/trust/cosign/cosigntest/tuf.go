package cosigntest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TUFRepo is a TUF repository made in a test, standing in for the Sigstore
// instance's (tuf-repo-cdn.sigstore.dev): one Ed25519 key per role, root
// versions that RotateRoot adds, and Publish, which signs a
// trusted_root.json target as the repository publishes it and returns the
// files as an admin copies them into the ConfigMap openfief-sigstore-root.
type TUFRepo struct {
	roots   [][]byte // every root version, from 1
	keys    map[string]signature.Signer
	version int64 // of timestamp, snapshot and targets, bumped by Publish
	expires time.Time
}

// NewTUFRepo makes a repository at root version 1 whose metadata expires in
// a year.
func NewTUFRepo(t testing.TB) *TUFRepo {
	t.Helper()
	r := &TUFRepo{keys: map[string]signature.Signer{}, expires: time.Now().Add(365 * 24 * time.Hour).UTC().Truncate(time.Second)}
	for _, role := range []string{metadata.ROOT, metadata.TIMESTAMP, metadata.SNAPSHOT, metadata.TARGETS} {
		r.keys[role] = newEd25519Signer(t)
	}
	r.roots = append(r.roots, r.signRoot(t, 1, nil))
	return r
}

// WithExpiry makes the metadata Publish and RotateRoot write from now on
// expire at when (such as in the past).
func (r *TUFRepo) WithExpiry(when time.Time) *TUFRepo {
	r.expires = when.UTC().Truncate(time.Second)
	return r
}

func newEd25519Signer(t testing.TB) signature.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.LoadED25519Signer(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signRoot writes root version v with r's current keys, signed by them and
// by previous (the root key of the version before), as a rotation is.
func (r *TUFRepo) signRoot(t testing.TB, v int64, previous signature.Signer) []byte {
	t.Helper()
	md := metadata.Root(r.expires)
	md.Signed.Version = v
	for _, role := range []string{metadata.ROOT, metadata.TIMESTAMP, metadata.SNAPSHOT, metadata.TARGETS} {
		if err := md.Signed.AddKey(tufKey(t, r.keys[role]), role); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []signature.Signer{previous, r.keys[metadata.ROOT]} {
		if s == nil {
			continue
		}
		if _, err := md.Sign(s); err != nil {
			t.Fatal(err)
		}
	}
	b, err := md.ToBytes(false)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tufKey(t testing.TB, s signature.Signer) *metadata.Key {
	t.Helper()
	pub, err := s.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := metadata.KeyFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Root is root version v (from 1) as the repository publishes it.
func (r *TUFRepo) Root(v int64) []byte { return r.roots[v-1] }

// RootVersion is the newest root version.
func (r *TUFRepo) RootVersion() int64 { return int64(len(r.roots)) }

// RotateRoot makes a new root version with new keys for every role, signed
// by the old root key and the new one, as Sigstore's root signing does.
func (r *TUFRepo) RotateRoot(t testing.TB) {
	t.Helper()
	previous := r.keys[metadata.ROOT]
	for role := range r.keys {
		r.keys[role] = newEd25519Signer(t)
	}
	r.roots = append(r.roots, r.signRoot(t, int64(len(r.roots))+1, previous))
}

// Publish signs trustedRoot as the target trusted_root.json with new
// targets, snapshot and timestamp versions and returns the ConfigMap data
// an admin copies from the repository: every root version after 1 as
// "N.root.json" and the four files.
func (r *TUFRepo) Publish(t testing.TB, trustedRoot []byte) map[string]string {
	t.Helper()
	r.version++
	targets := metadata.Targets(r.expires)
	targets.Signed.Version = r.version
	tf, err := metadata.TargetFile().FromBytes(plugins.TrustRootTargetKey, trustedRoot, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	targets.Signed.Targets[plugins.TrustRootTargetKey] = tf
	targetsJSON := r.sign(t, targets, metadata.TARGETS)

	snapshot := metadata.Snapshot(r.expires)
	snapshot.Signed.Version = r.version
	snapshot.Signed.Meta[plugins.TrustRootTargetsKey] = metadata.MetaFile(r.version)
	snapshotJSON := r.sign(t, snapshot, metadata.SNAPSHOT)

	timestamp := metadata.Timestamp(r.expires)
	timestamp.Signed.Version = r.version
	timestamp.Signed.Meta[plugins.TrustRootSnapshotKey] = metadata.MetaFile(r.version)
	timestampJSON := r.sign(t, timestamp, metadata.TIMESTAMP)

	data := map[string]string{
		plugins.TrustRootTimestampKey: string(timestampJSON),
		plugins.TrustRootSnapshotKey:  string(snapshotJSON),
		plugins.TrustRootTargetsKey:   string(targetsJSON),
		plugins.TrustRootTargetKey:    string(trustedRoot),
	}
	for v := int64(2); v <= r.RootVersion(); v++ {
		data[fmt.Sprintf("%d.root.json", v)] = string(r.Root(v))
	}
	return data
}

// sign signs md with role's key and serialises it.
func (r *TUFRepo) sign(t testing.TB, md interface {
	Sign(signature.Signer) (*metadata.Signature, error)
	ToBytes(bool) ([]byte, error)
}, role string) []byte {
	t.Helper()
	if _, err := md.Sign(r.keys[role]); err != nil {
		t.Fatal(err)
	}
	b, err := md.ToBytes(false)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TrustedRootJSON is the trusted_root.json of a virtual Sigstore: its
// Fulcio CA, Rekor log, CT log and TSA, valid for the hour around now.
func TrustedRootJSON(t testing.TB, vs *ca.VirtualSigstore) []byte {
	t.Helper()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), rawLogIDs(t, vs.CTLogs()),
		vs.TimestampingAuthorities(), rawLogIDs(t, vs.RekorLogs()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawLogIDs gives each log the ID a trusted_root.json holds, the raw key ID
// bytes: the virtual Sigstore's logs carry the hex text of it instead, which
// would be written and read back as another ID.
func rawLogIDs(t testing.TB, logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
	t.Helper()
	out := make(map[string]*root.TransparencyLog, len(logs))
	for id, l := range logs {
		raw, err := hex.DecodeString(id)
		if err != nil {
			t.Fatalf("log ID %q is not hex: %v", id, err)
		}
		c := *l
		c.ID = raw
		out[id] = &c
	}
	return out
}
