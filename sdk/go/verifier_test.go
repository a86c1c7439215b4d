// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

func allKeys() []jose.JSONWebKey {
	return []jose.JSONWebKey{rsaKey.jwk(), ec256.jwk(), ec384.jwk(), ec521.jwk()}
}

func TestJWKSVerifierAcceptsEveryAllowedAlgorithm(t *testing.T) {
	v := newJWKSDir(t, testIssuer, allKeys()...).verifier()
	for _, k := range []signingKey{rsaKey, ec256, ec384, ec521} {
		t.Run(string(k.alg), func(t *testing.T) {
			if err := v.Verify(k.sign(t, validClaims())); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// unsignedToken builds a compact JWS with the given header and claims and
// signature, without go-jose, as an attacker would.
func unsignedToken(t testing.TB, header map[string]any, claims any, sig []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + enc.EncodeToString(sig)
}

// hs256WithPublicKey is the classic algorithm-confusion attack: an HMAC
// token keyed with the RSA public key's bytes, under the RSA key's ID.
func hs256WithPublicKey(t testing.TB, claims any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(rsaKey.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	unsigned := unsignedToken(t, map[string]any{"alg": "HS256", "kid": rsaKey.kid, "typ": "JWT"}, claims, nil)
	signingInput := unsigned[:strings.LastIndex(unsigned, ".")]
	mac := hmac.New(sha256.New, der)
	mac.Write([]byte(signingInput))
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// refusedTokens are the tokens every check of the core's identity must
// refuse, keyed by what is wrong with them.
func refusedTokens(t testing.TB) map[string]string {
	with := func(edit func(*jwt.Claims)) jwt.Claims {
		c := validClaims()
		edit(&c)
		return c
	}
	now := time.Now()
	otherKey := newKey(rsaKey.kid, jose.RS256) // same kid, other key
	unknownKid := newKey("not-published", jose.ES256)
	noKid := signingKey{kid: "", alg: ec256.alg, priv: ec256.priv}
	valid := ec256.sign(t, validClaims())
	parts := strings.Split(valid, ".")
	return map[string]string{
		"missing":            "",
		"garbage":            "not a token",
		"alg none":           unsignedToken(t, map[string]any{"alg": "none", "kid": rsaKey.kid}, validClaims(), nil),
		"alg none, no sig":   strings.TrimSuffix(unsignedToken(t, map[string]any{"alg": "none"}, validClaims(), nil), "."),
		"HS256 with pub key": hs256WithPublicKey(t, validClaims()),
		"PS256":              unsignedToken(t, map[string]any{"alg": "PS256", "kid": rsaKey.kid}, validClaims(), []byte("x")),
		"wrong issuer":       rsaKey.sign(t, with(func(c *jwt.Claims) { c.Issuer = "https://evil.example" })),
		"no issuer":          rsaKey.sign(t, with(func(c *jwt.Claims) { c.Issuer = "" })),
		"wrong subject":      rsaKey.sign(t, with(func(c *jwt.Claims) { c.Subject = "system:serviceaccount:openfief:plugin-x" })),
		"other audience":     rsaKey.sign(t, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{InstanceAudience("ibkr-flex")} })),
		"core audience":      rsaKey.sign(t, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"openfief-core"} })),
		"no audience":        rsaKey.sign(t, with(func(c *jwt.Claims) { c.Audience = nil })),
		"expired":            rsaKey.sign(t, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute)) })),
		"no expiry":          rsaKey.sign(t, with(func(c *jwt.Claims) { c.Expiry = nil })),
		"not yet valid":      rsaKey.sign(t, with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(5 * time.Minute)) })),
		"issued in future":   rsaKey.sign(t, with(func(c *jwt.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(5 * time.Minute)) })),
		"unknown kid":        unknownKid.sign(t, validClaims()),
		"no kid":             noKid.sign(t, validClaims()),
		"other key same kid": otherKey.sign(t, validClaims()),
		"tampered payload":   parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+testIssuer+`"}`)) + "." + parts[2],
		"too long":           valid + strings.Repeat("A", maxTokenLength),
	}
}

func TestJWKSVerifierRefuses(t *testing.T) {
	v := newJWKSDir(t, testIssuer, allKeys()...).verifier()
	for name, token := range refusedTokens(t) {
		t.Run(name, func(t *testing.T) {
			err := v.Verify(token)
			if !errors.Is(err, ErrTokenRefused) {
				t.Fatalf("Verify = %v, want ErrTokenRefused", err)
			}
			if token != "" && strings.Contains(err.Error(), token) {
				t.Fatalf("error contains the token")
			}
		})
	}
}

func TestJWKSVerifierLeeway(t *testing.T) {
	v := newJWKSDir(t, testIssuer, allKeys()...).verifier()
	c := validClaims()
	c.Expiry = jwt.NewNumericDate(time.Now().Add(-30 * time.Second))
	if err := v.Verify(ec256.sign(t, c)); err != nil {
		t.Fatalf("token expired 30 s ago: Verify = %v, want accepted within the one-minute leeway", err)
	}
	c.Expiry = jwt.NewNumericDate(time.Now().Add(-90 * time.Second))
	if err := v.Verify(ec256.sign(t, c)); !errors.Is(err, jwt.ErrExpired) {
		t.Fatalf("token expired 90 s ago: Verify = %v, want ErrExpired", err)
	}
}

func TestJWKSVerifierAudienceAmongOthers(t *testing.T) {
	v := newJWKSDir(t, testIssuer, allKeys()...).verifier()
	c := validClaims()
	c.Audience = jwt.Audience{"something-else", InstanceAudience(testInstance)}
	if err := v.Verify(rsaKey.sign(t, c)); err != nil {
		t.Fatalf("Verify = %v", err)
	}
}

func TestJWKSVerifierPicksUpRotatedKeys(t *testing.T) {
	d := newJWKSDir(t, testIssuer, rsaKey.jwk())
	v := d.verifier()
	oldToken := rsaKey.sign(t, validClaims())
	newToken := rsaKey2.sign(t, validClaims())
	if err := v.Verify(oldToken); err != nil {
		t.Fatalf("before rotation, old key: %v", err)
	}
	if err := v.Verify(newToken); err == nil {
		t.Fatal("before rotation, new key accepted")
	}
	parsed := v.cached

	// The operator adds the new key; the kubelet swaps the mount.
	d.write(testIssuer, rsaKey.jwk(), rsaKey2.jwk())
	if err := v.Verify(newToken); err != nil {
		t.Fatalf("after adding the new key: %v", err)
	}
	if v.cached == parsed {
		t.Fatal("changed files were not parsed again")
	}

	// The old key is retired.
	d.write(testIssuer, rsaKey2.jwk())
	if err := v.Verify(oldToken); err == nil {
		t.Fatal("retired key still accepted")
	}
	if err := v.Verify(newToken); err != nil {
		t.Fatalf("after retiring the old key: %v", err)
	}

	// The issuer changes too.
	d.write("https://issuer.example", rsaKey2.jwk())
	if err := v.Verify(newToken); !errors.Is(err, jwt.ErrInvalidIssuer) {
		t.Fatalf("after the issuer changed: Verify = %v, want ErrInvalidIssuer", err)
	}
}

func TestJWKSVerifierParsesOnlyWhenFilesChange(t *testing.T) {
	d := newJWKSDir(t, testIssuer, allKeys()...)
	v := d.verifier()
	tok := ec256.sign(t, validClaims())
	if err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	first := v.cached
	// Same bytes, new files: read again but not parsed again.
	d.write(testIssuer, allKeys()...)
	if err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if v.cached != first {
		t.Fatal("unchanged files were parsed again")
	}
}

func TestJWKSVerifierFailsClosedOnBadFiles(t *testing.T) {
	tok := ec256.sign(t, validClaims())
	good, err := json.Marshal(jose.JSONWebKeySet{Keys: allKeys()})
	if err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string]struct{ issuer, jwks string }{
		"empty issuer":      {"  \n", string(good)},
		"empty key set":     {testIssuer, `{"keys":[]}`},
		"not JSON":          {testIssuer, `{"keys":`},
		"no usable key":     {testIssuer, `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"ec-256"}]}`},
		"keys not an array": {testIssuer, `{"keys":{}}`},
	} {
		t.Run(name, func(t *testing.T) {
			d := newJWKSDir(t, testIssuer, allKeys()...)
			v := d.verifier()
			if err := v.Verify(tok); err != nil {
				t.Fatalf("with good files: %v", err)
			}
			d.writeRaw(files.issuer, []byte(files.jwks))
			if err := v.Verify(tok); !errors.Is(err, ErrTokenRefused) {
				t.Fatalf("Verify = %v, want refused", err)
			}
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		v, err := NewJWKSVerifier(t.TempDir()+"/nope", testInstance, testSubject)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(tok); !errors.Is(err, ErrTokenRefused) {
			t.Fatalf("Verify = %v, want refused", err)
		}
	})
}

func TestNewCoreVerifierFromEnvironment(t *testing.T) {
	d := newJWKSDir(t, testIssuer, allKeys()...)
	t.Setenv(EnvSAJWKSDir, d.dir)
	t.Setenv(EnvInstance, testInstance)
	t.Setenv(EnvCoreSubject, testSubject)
	v, err := NewCoreVerifier()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(ec384.sign(t, validClaims())); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	t.Setenv(EnvInstance, "")
	if _, err := NewCoreVerifier(); err == nil {
		t.Fatal("NewCoreVerifier without an instance name succeeded")
	}
	t.Setenv(EnvInstance, testInstance)
	t.Setenv(EnvCoreSubject, "")
	if _, err := NewCoreVerifier(); err == nil {
		t.Fatal("NewCoreVerifier without a core subject succeeded")
	}
}

// FuzzJWKSVerifier feeds arbitrary strings, and mutations of real tokens,
// to Verify: it must never panic, and must accept nothing but the one valid
// token it was seeded with (an accepted mutation would be a forgery).
func FuzzJWKSVerifier(f *testing.F) {
	d := newJWKSDir(f, testIssuer, allKeys()...)
	v := d.verifier()
	valid := map[string]bool{}
	for _, k := range []signingKey{rsaKey, ec256, ec384, ec521} {
		tok := k.sign(f, validClaims())
		valid[tok] = true
		f.Add(tok)
	}
	for _, tok := range refusedTokens(f) {
		f.Add(tok)
	}
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		err := v.Verify(token)
		if err == nil && !valid[token] {
			t.Fatalf("accepted a token that was never signed: %q", token)
		}
		if err != nil && len(token) > 8 && strings.Contains(err.Error(), token) {
			t.Fatalf("error contains the token")
		}
	})
}
