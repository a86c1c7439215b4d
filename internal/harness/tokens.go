package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuer is the ServiceAccount token issuer the harness's stand-in cluster
// signs as; the plugin reads it from the mounted openfief-sa-jwks.
const issuer = "https://kubernetes.default.svc.openfief-harness.invalid"

// tokenLife is how long the tokens the harness mints last, as the
// operator's projected tokens (plugins.TokenExpirationSeconds).
const tokenLife = time.Hour

// minter plays the cluster's token signer: it signs ServiceAccount-shaped
// tokens (ES256) with a key of its own, published as the JWKS the operator
// mounts in every plugin pod (D-59).
type minter struct {
	key  *ecdsa.PrivateKey
	kid  string
	now  func() time.Time
	sign jose.Signer
}

func newMinter(now func() time.Time) (*minter, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	m := &minter{key: key, kid: "openfief-harness", now: now}
	m.sign, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", m.kid))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// jwks is the openfief-sa-jwks ConfigMap's jwks.json.
func (m *minter) jwks() ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &m.key.PublicKey, KeyID: m.kid, Algorithm: string(jose.ES256), Use: "sig"}}}
	return json.Marshal(set)
}

// mint signs a token for subject and audience, issued at iat and lasting
// tokenLife.
func (m *minter) mint(subject, audience string, iat time.Time) (string, error) {
	c := jwt.Claims{
		Issuer: issuer, Subject: subject, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(iat), NotBefore: jwt.NewNumericDate(iat),
		Expiry: jwt.NewNumericDate(iat.Add(tokenLife)),
	}
	tok, err := jwt.Signed(m.sign).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("mint a token: %w", err)
	}
	return tok, nil
}
