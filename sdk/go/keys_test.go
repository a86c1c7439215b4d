// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func TestParseSigningKeysKeepsOnlyPublicSigningKeys(t *testing.T) {
	weakRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(k jose.JSONWebKey) json.RawMessage {
		b, err := k.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	withAlg := func(k jose.JSONWebKey, alg string) jose.JSONWebKey { k.Algorithm = alg; return k }
	withUse := func(k jose.JSONWebKey, use string) jose.JSONWebKey { k.Use = use; return k }
	withKid := func(k jose.JSONWebKey, kid string) jose.JSONWebKey { k.KeyID = kid; return k }
	p224JWK := `{"kty":"EC","crv":"P-224","kid":"p224","x":"` +
		base64.RawURLEncoding.EncodeToString(p224.X.FillBytes(make([]byte, 28))) + `","y":"` +
		base64.RawURLEncoding.EncodeToString(p224.Y.FillBytes(make([]byte, 28))) + `"}`

	tests := map[string]struct {
		key  json.RawMessage
		want jose.SignatureAlgorithm // "" when the key must be dropped
	}{
		"RSA public":             {raw(rsaKey.jwk()), jose.RS256},
		"RSA without alg or use": {raw(withUse(withAlg(rsaKey.jwk(), ""), "")), jose.RS256},
		"P-256 public":           {raw(ec256.jwk()), jose.ES256},
		"P-384 public":           {raw(ec384.jwk()), jose.ES384},
		"P-521 public":           {raw(ec521.jwk()), jose.ES512},
		"RSA private":            {raw(jose.JSONWebKey{Key: rsaKey.priv, KeyID: "k"}), ""},
		"EC private":             {raw(jose.JSONWebKey{Key: ec256.priv, KeyID: "k"}), ""},
		"symmetric":              {json.RawMessage(`{"kty":"oct","k":"c2VjcmV0","kid":"k"}`), ""},
		"RSA 1024 bits":          {raw(jose.JSONWebKey{Key: &weakRSA.PublicKey, KeyID: "k"}), ""},
		"P-224":                  {json.RawMessage(p224JWK), ""},
		"no kid":                 {raw(withKid(rsaKey.jwk(), "")), ""},
		"use enc":                {raw(withUse(rsaKey.jwk(), "enc")), ""},
		"RSA marked PS256":       {raw(withAlg(rsaKey.jwk(), "PS256")), ""},
		"RSA marked HS256":       {raw(withAlg(rsaKey.jwk(), "HS256")), ""},
		"P-256 marked ES384":     {raw(withAlg(ec256.jwk(), "ES384")), ""},
		"not a key":              {json.RawMessage(`{"kty":"RSA","kid":"k"}`), ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set, err := json.Marshal(map[string][]json.RawMessage{"keys": {tt.key, raw(withKid(ec256.jwk(), "anchor"))}})
			if err != nil {
				t.Fatal(err)
			}
			keys, err := parseSigningKeys(set)
			if err != nil {
				t.Fatal(err)
			}
			var kid struct {
				Kid string `json:"kid"`
			}
			if err := json.Unmarshal(tt.key, &kid); err != nil {
				t.Fatal(err)
			}
			got, kept := keys[kid.Kid]
			switch {
			case tt.want == "" && kept:
				t.Fatalf("kept key %q with %s, want it dropped", kid.Kid, got.alg)
			case tt.want != "" && (!kept || got.alg != tt.want):
				t.Fatalf("key %q: kept=%v alg=%s, want kept with %s", kid.Kid, kept, got.alg, tt.want)
			}
		})
	}
}

func TestParseSigningKeysDropsDuplicateKeyIDs(t *testing.T) {
	dup := rsaKey2.jwk()
	dup.KeyID = rsaKey.kid
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{rsaKey.jwk(), dup, dup, ec256.jwk()}})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := parseSigningKeys(set)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keys[rsaKey.kid]; ok {
		t.Fatal("an ambiguous key ID was kept")
	}
	if _, ok := keys[ec256.kid]; !ok {
		t.Fatal("the unambiguous key was dropped")
	}
}

// FuzzParseSigningKeys checks the key set parser never panics and never
// keeps a key that is not a public RSA or EC key with a key ID.
func FuzzParseSigningKeys(f *testing.F) {
	good, err := json.Marshal(jose.JSONWebKeySet{Keys: allKeys()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"a"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := parseSigningKeys(data)
		if err != nil {
			return
		}
		for kid, k := range keys {
			if kid == "" {
				t.Fatal("kept a key without an ID")
			}
			switch k.key.(type) {
			case *rsa.PublicKey, *ecdsa.PublicKey:
			default:
				t.Fatalf("kept key %q of type %T", kid, k.key)
			}
		}
	})
}
