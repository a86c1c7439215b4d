package ocisign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// NewKeySignerFromPEM makes a signer with a private key read from a PEM
// file, as `cosign sign --key` does: an ECDSA P-256 key, unencrypted
// (PKCS#8 "PRIVATE KEY" or SEC 1 "EC PRIVATE KEY") or encrypted by
// `cosign generate-key-pair` ("ENCRYPTED SIGSTORE PRIVATE KEY"), which
// password unlocks. No error repeats the key or the password.
func NewKeySignerFromPEM(keyPEM []byte, password func() ([]byte, error)) (*KeySigner, error) {
	pf := cryptoutils.PassFunc(func(bool) ([]byte, error) {
		if password == nil {
			return nil, errors.New("the key is encrypted and no password was given")
		}
		return password()
	})
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(keyPEM, pf)
	if err != nil {
		return nil, errors.New("read the signing key: not a PEM private key, or a wrong password")
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("the signing key must be ECDSA P-256, as cosign generate-key-pair makes")
	}
	der, err := x509.MarshalPKIXPublicKey(ec.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &KeySigner{kp: &fileKeypair{key: ec, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}}, nil
}

// fileKeypair is sigstore-go's sign.Keypair over a loaded ECDSA P-256 key,
// the same algorithm and hint as its EphemeralKeypair.
type fileKeypair struct {
	key  *ecdsa.PrivateKey
	hint []byte
}

func (k *fileKeypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (k *fileKeypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

func (k *fileKeypair) GetHint() []byte                { return k.hint }
func (k *fileKeypair) GetKeyAlgorithm() string        { return "ECDSA" }
func (k *fileKeypair) GetPublicKey() crypto.PublicKey { return k.key.Public() }

func (k *fileKeypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.key.Public())
	return string(b), err
}

// SignData signs the SHA-256 of data and returns the signature and the
// digest signed.
func (k *fileKeypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := k.key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return nil, nil, err
	}
	return sig, sum[:], nil
}

// remoteOptions are the registry options of every write: the context, and
// the credentials of the Docker config for registries that need them
// (loopback test registries need none).
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// LoadKeySigner reads a private key file for NewKeySignerFromPEM, unlocked
// by COSIGN_PASSWORD as cosign reads it: what `make sign`, `make attest`
// and `make release KEY=...` do with their --key.
func LoadKeySigner(file string) (*KeySigner, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return NewKeySignerFromPEM(raw, func() ([]byte, error) {
		pw, ok := os.LookupEnv("COSIGN_PASSWORD")
		if !ok {
			return nil, errors.New("the key is encrypted: set COSIGN_PASSWORD")
		}
		return []byte(pw), nil
	})
}
