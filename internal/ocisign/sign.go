package ocisign

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// What cosign v3 writes for `cosign sign` (see shared/notes/sigstore.md);
// the statement's predicate type is plugins.SignPredicateType.
const (
	// BundleMediaType is a Sigstore bundle v0.3.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	inTotoType      = "application/vnd.in-toto+json"
	emptyMediaType  = "application/vnd.oci.empty.v1+json"
)

// KeySigner signs image digests with one ECDSA P-256 key, like
// `cosign sign --key` without a transparency log. The operator trusts it as
// an owner signer with a public key (D-45).
type KeySigner struct {
	kp sign.Keypair
}

// NewKeySigner makes a signer with a fresh key. Its public key goes into the
// owner's signers.json.
func NewKeySigner() (*KeySigner, error) {
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, err
	}
	return &KeySigner{kp: kp}, nil
}

// PublicKeyPEM is the signer's public key in PEM form.
func (s *KeySigner) PublicKeyPEM() (string, error) { return s.kp.GetPublicKeyPem() }

// SignersJSON is an owner signers.json that trusts this key under name.
func (s *KeySigner) SignersJSON(name string) ([]byte, error) {
	pem, err := s.PublicKeyPEM()
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(map[string]any{"signers": []any{map[string]string{"name": name, "publicKey": pem}}}, "", "  ")
}

// Sign signs ref's digest and stores the bundle in the registry as a
// referrer of that digest, exactly as cosign v3 does.
func (s *KeySigner) Sign(ctx context.Context, ref plugins.ImageRef) error {
	return signRef(ctx, ref, s)
}

// bundler makes a Sigstore bundle (JSON) of an in-toto statement: a
// KeySigner or a KeylessSigner (and release.Signer).
type bundler interface {
	Bundle(ctx context.Context, statement []byte) ([]byte, error)
}

// signRef signs ref's digest with b and attaches the bundle to ref.
func signRef(ctx context.Context, ref plugins.ImageRef, b bundler) error {
	stmt, err := Statement(ref.Digest(), plugins.SignPredicateType)
	if err != nil {
		return err
	}
	bundle, err := b.Bundle(ctx, stmt)
	if err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	_, err = Attach(ctx, ref, bundle, plugins.SignPredicateType)
	return err
}

// Bundle signs statement in a DSSE envelope with the key and returns the
// Sigstore bundle (JSON) whose verification material is the key's hint, as
// `cosign sign --key` does without a transparency log.
func (s *KeySigner) Bundle(ctx context.Context, statement []byte) ([]byte, error) {
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: inTotoType}, s.kp, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(pb)
}

// Statement is the in-toto statement cosign v3 signs for an image digest
// ("sha256:<hex>"): one subject and the given predicate type
// (plugins.SignPredicateType for a signature).
func Statement(digest, predicateType string) ([]byte, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if _, err := hex.DecodeString(h); !ok || err != nil {
		return nil, fmt.Errorf("digest %q is not sha256", digest)
	}
	return json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"digest": map[string]string{"sha256": h}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
}

// Attach stores bundle as an OCI referrer of ref exactly as cosign v3's
// WriteAttestationNewBundleFormat does: an image manifest with the bundle
// artifactType, the empty config, the bundle as its one layer, ref as
// subject and cosign's annotations naming predicateType. Where a registry
// lacks the Referrers API, go-containerregistry also updates the
// sha256-<hex> tag. It returns the referrer manifest's digest.
func Attach(ctx context.Context, ref plugins.ImageRef, bundle []byte, predicateType string) (v1.Hash, error) {
	subject, err := digestRef(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	repo := subject.Context()
	opts := remoteOptions(ctx)
	layer := static.NewLayer(bundle, types.MediaType(BundleMediaType))
	config := static.NewLayer([]byte("{}"), types.MediaType(emptyMediaType))
	for _, l := range []remoteLayer{layer, config} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("upload bundle: %w", err)
		}
	}
	desc, err := remote.Head(subject, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read %s: %w", ref, err)
	}
	layerDesc, err := describeLayer(layer, nil)
	if err != nil {
		return v1.Hash{}, err
	}
	configDesc, err := describeLayer(config, map[string]any{"artifactType": BundleMediaType})
	if err != nil {
		return v1.Hash{}, err
	}
	raw, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     string(types.OCIManifestSchema1),
		"artifactType":  BundleMediaType,
		"config":        configDesc,
		"layers":        []any{layerDesc},
		"subject":       map[string]any{"mediaType": string(desc.MediaType), "digest": desc.Digest.String(), "size": desc.Size},
		"annotations": map[string]string{
			"dev.sigstore.bundle.content":       "dsse-envelope",
			"dev.sigstore.bundle.predicateType": predicateType,
			"org.opencontainers.image.created":  time.Now().UTC().Format(time.RFC3339),
		},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	return PutManifest(ctx, repo, raw)
}
