package cosigntest

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Statement is the in-toto statement cosign v3 signs for an image: one
// subject with the digest ("sha256:<hex>") and the given predicate type
// (plugins.SignPredicateType for a signature).
func Statement(t testing.TB, digest, predicateType string) []byte {
	t.Helper()
	b, err := ocisign.Statement(digest, predicateType)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Signer makes Sigstore bundles of statements: a Keyless or a Key.
type Signer interface {
	Bundle(t testing.TB, statement []byte) []byte
}

// Sign signs ref's digest with s as `cosign sign` does (a statement of
// plugins.SignPredicateType) and attaches the bundle as a referrer of ref,
// returning the referrer manifest's digest.
func (r *Registry) Sign(t testing.TB, ref plugins.ImageRef, s Signer) v1.Hash {
	t.Helper()
	return r.Attach(t, ref, s.Bundle(t, Statement(t, ref.Digest(), plugins.SignPredicateType)), plugins.SignPredicateType)
}

// Keyless signs like `cosign sign` with an OIDC identity, through a virtual
// Sigstore (Fulcio, Rekor, TSA; no CT log, so no SCT). Its bundles verify
// against VS as trusted material, created and checked in the same test:
// the virtual Sigstore's keys are random and its certificates last ten
// minutes.
type Keyless struct {
	VS      *ca.VirtualSigstore
	Issuer  string
	Subject string
}

// NewKeyless starts a virtual Sigstore and a signer with issuer and subject.
func NewKeyless(t testing.TB, issuer, subject string) *Keyless {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return &Keyless{VS: vs, Issuer: issuer, Subject: subject}
}

// Bundle returns a bundle (JSON) of statement signed in DSSE with a Fulcio
// certificate, an RFC 3161 timestamp and a Rekor v2 entry with its
// inclusion proof, as cosign v3 produces against the public-good instance.
func (k *Keyless) Bundle(t testing.TB, statement []byte) []byte {
	t.Helper()
	ent, err := k.VS.AttestHashedRekordV2(k.Subject, k.Issuer, statement)
	if err != nil {
		t.Fatal(err)
	}
	return entityBundle(t, k.VS, ent, false)
}

// BundleRekorV1At returns a bundle like Bundle but with a Rekor v1 entry
// (inclusion proof and SET) integrated at the given time. The certificate
// is valid from when the virtual Sigstore signs for ten minutes, so an
// integrated time past that makes the certificate expired at the log time.
func (k *Keyless) BundleRekorV1At(t testing.TB, statement []byte, integrated time.Time) []byte {
	t.Helper()
	ent, err := k.VS.AttestAtTime(k.Subject, k.Issuer, statement, integrated, true)
	if err != nil {
		t.Fatal(err)
	}
	return entityBundle(t, k.VS, ent, true)
}

// entityBundle turns the virtual Sigstore's test entity into a serialised
// bundle v0.3. For a Rekor v1 entry it adds what the test entity leaves
// out: the entry's kind and version and its signed entry timestamp.
func entityBundle(t testing.TB, vs *ca.VirtualSigstore, ent *ca.TestEntity, rekorV1 bool) []byte {
	t.Helper()
	vc, err := ent.VerificationContent()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ent.SignatureContent()
	if err != nil {
		t.Fatal(err)
	}
	env := sc.EnvelopeContent().RawEnvelope()
	tss, err := ent.Timestamps()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ent.TlogEntries()
	if err != nil {
		t.Fatal(err)
	}
	var tles []*protorekor.TransparencyLogEntry
	for _, e := range entries {
		tle := e.TransparencyLogEntry()
		if rekorV1 {
			tle = rekorV1Entry(t, vs, tle)
		}
		tles = append(tles, tle)
	}
	var rfc3161 []*protocommon.RFC3161SignedTimestamp
	for _, ts := range tss {
		rfc3161 = append(rfc3161, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: ts})
	}
	var sigs []*protodsse.Signature
	for _, s := range env.Signatures {
		sigs = append(sigs, &protodsse.Signature{Sig: b64(t, s.Sig), Keyid: s.KeyID})
	}
	pb := &protobundle.Bundle{
		MediaType: ocisign.BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_Certificate{
				Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw},
			},
			TlogEntries:               tles,
			TimestampVerificationData: &protobundle.TimestampVerificationData{Rfc3161Timestamps: rfc3161},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload:     b64(t, env.Payload),
			PayloadType: env.PayloadType,
			Signatures:  sigs,
		}},
	}
	raw, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func rekorV1Entry(t testing.TB, vs *ca.VirtualSigstore, tle *protorekor.TransparencyLogEntry) *protorekor.TransparencyLogEntry {
	t.Helper()
	var body struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(tle.GetCanonicalizedBody(), &body); err != nil {
		t.Fatal(err)
	}
	set, err := vs.RekorSignPayload(tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.GetCanonicalizedBody()),
		IntegratedTime: tle.GetIntegratedTime(),
		LogIndex:       tle.GetLogIndex(),
		LogID:          hex.EncodeToString(tle.GetLogId().GetKeyId()),
	})
	if err != nil {
		t.Fatal(err)
	}
	tle.KindVersion = &protorekor.KindVersion{Kind: body.Kind, Version: body.APIVersion}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	return tle
}

// Key signs like `cosign sign --key` without a transparency log: a DSSE
// bundle whose verification material is the public key's hint (the
// ocisign.KeySigner that `openfief dev` signs with).
type Key struct {
	s *ocisign.KeySigner
}

// NewKey makes a signer with a fresh ECDSA P-256 key.
func NewKey(t testing.TB) *Key {
	t.Helper()
	s, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	return &Key{s: s}
}

// PublicKeyPEM is the signer's public key, PEM-encoded.
func (k *Key) PublicKeyPEM(t testing.TB) string {
	t.Helper()
	p, err := k.s.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SignersJSON is an owner signers.json that trusts the key under name
// (D-45).
func (k *Key) SignersJSON(t testing.TB, name string) []byte {
	t.Helper()
	b, err := k.s.SignersJSON(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Bundle returns a bundle (JSON) of statement signed with the key.
func (k *Key) Bundle(t testing.TB, statement []byte) []byte {
	t.Helper()
	raw, err := k.s.Bundle(context.Background(), statement)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Attach stores bundle as a referrer of ref's digest, exactly as cosign v3
// does (ocisign.Attach), and returns the referrer manifest's digest.
func (r *Registry) Attach(t testing.TB, ref plugins.ImageRef, bundle []byte, predicateType string) v1.Hash {
	t.Helper()
	h, err := ocisign.Attach(context.Background(), ref, bundle, predicateType)
	if err != nil {
		t.Fatalf("attach bundle: %v", err)
	}
	return h
}

// PutManifest stores a raw OCI image manifest in repo by its digest and
// returns the digest, for tests that attach something other than cosign
// would.
func (r *Registry) PutManifest(t testing.TB, repo name.Repository, raw []byte) v1.Hash {
	t.Helper()
	h, err := ocisign.PutManifest(context.Background(), repo, raw)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func b64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
