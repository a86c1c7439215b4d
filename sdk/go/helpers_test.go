// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	testIssuer   = "https://kubernetes.default.svc.cluster.local"
	testSubject  = "system:serviceaccount:openfief:openfief-core"
	testInstance = "nbp-fx"
)

// signingKey is a generated private key with its key ID and algorithm.
type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

// Generated keys are expensive (RSA especially), so tests share them.
var (
	rsaKey  = newKey("rsa-1", jose.RS256)
	rsaKey2 = newKey("rsa-2", jose.RS256)
	ec256   = newKey("ec-256", jose.ES256)
	ec384   = newKey("ec-384", jose.ES384)
	ec521   = newKey("ec-521", jose.ES512)
)

func newKey(kid string, alg jose.SignatureAlgorithm) signingKey {
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.ES384:
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jose.ES512:
		priv, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	}
	if err != nil {
		panic(err)
	}
	return signingKey{kid: kid, alg: alg, priv: priv}
}

// jwk is the key's public JSON Web Key as the API server publishes it.
func (k signingKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// claims are the claims of a valid core token for testInstance.
func validClaims() jwt.Claims {
	now := time.Now()
	return jwt.Claims{
		Issuer:    testIssuer,
		Subject:   testSubject,
		Audience:  jwt.Audience{InstanceAudience(testInstance)},
		Expiry:    jwt.NewNumericDate(now.Add(10 * time.Minute)),
		NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
	}
}

// sign returns a compact JWT of claims signed by k, with k's key ID.
func (k signingKey) sign(t testing.TB, claims any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwksDir is a directory laid out like a ConfigMap volume the kubelet
// writes: jwks.json and issuer are links into ..data, itself a link to a
// timestamped directory that each update replaces atomically.
type jwksDir struct {
	t   testing.TB
	dir string
	gen atomic.Int64
}

func newJWKSDir(t testing.TB, issuer string, keys ...jose.JSONWebKey) *jwksDir {
	t.Helper()
	d := &jwksDir{t: t, dir: t.TempDir()}
	for _, name := range []string{JWKSFileName, IssuerFileName} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(d.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	d.write(issuer, keys...)
	return d
}

// write publishes a new key set and issuer the way the kubelet does.
func (d *jwksDir) write(issuer string, keys ...jose.JSONWebKey) {
	d.t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		d.t.Fatal(err)
	}
	d.writeRaw(issuer, b)
}

func (d *jwksDir) writeRaw(issuer string, jwks []byte) {
	d.t.Helper()
	gen := "..gen" + strconv.FormatInt(d.gen.Add(1), 10)
	if err := os.Mkdir(filepath.Join(d.dir, gen), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, gen, JWKSFileName), jwks, 0o644); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, gen, IssuerFileName), []byte(issuer), 0o644); err != nil {
		d.t.Fatal(err)
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
}

func (d *jwksDir) verifier() *JWKSVerifier {
	d.t.Helper()
	v, err := NewJWKSVerifier(d.dir, testInstance, testSubject)
	if err != nil {
		d.t.Fatal(err)
	}
	return v
}

// serveUntilCleanup serves srv on ln until the test ends, then closes it and
// checks that Serve stopped because of that Close and nothing else.
func serveUntilCleanup(t testing.TB, srv *http.Server, ln net.Listener) {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
}

// writeFile writes content to path, creating its directory.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
