// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// minRSABits is the smallest RSA modulus a kept key may have.
const minRSABits = 2048

// allowedAlgorithms are the only signature algorithms a core token may use:
// those Kubernetes signs ServiceAccount tokens with. "none" and every HMAC
// algorithm are refused while parsing, before any key is tried.
var allowedAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// verifyKey is one kept public key and the only algorithm it verifies.
type verifyKey struct {
	key any
	alg jose.SignatureAlgorithm
}

// parseSigningKeys reads a JSON Web Key Set and keeps, by key ID, only the
// keys a core token may be checked with: public RSA keys of at least
// 2048 bits (RS256) and public EC keys on P-256, P-384 or P-521 (ES256,
// ES384, ES512), with a key ID, for signing ("use" empty or "sig") and, when
// "alg" is given, naming the algorithm that fits the key. Other keys, and
// every key whose ID appears twice, are dropped; a set that keeps no key is
// an error.
func parseSigningKeys(data []byte) (map[string]verifyKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%s is not a JSON Web Key Set: %w", JWKSFileName, err)
	}
	keys := make(map[string]verifyKey, len(set.Keys))
	dup := make(map[string]bool)
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		alg, ok := signingAlgorithm(k)
		if !ok {
			continue
		}
		if _, seen := keys[k.KeyID]; seen || dup[k.KeyID] {
			// Two keys under one ID are ambiguous: use neither.
			delete(keys, k.KeyID)
			dup[k.KeyID] = true
			continue
		}
		keys[k.KeyID] = verifyKey{key: k.Key, alg: alg}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no usable public signing key", JWKSFileName)
	}
	return keys, nil
}

// signingAlgorithm returns the one allowed algorithm k verifies, and false
// for a key that may not verify core tokens.
func signingAlgorithm(k jose.JSONWebKey) (jose.SignatureAlgorithm, bool) {
	if k.KeyID == "" || (k.Use != "" && k.Use != "sig") || !k.Valid() {
		return "", false
	}
	var alg jose.SignatureAlgorithm
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return "", false
		}
		alg = jose.RS256
	case *ecdsa.PublicKey:
		switch pub.Curve {
		case elliptic.P256():
			alg = jose.ES256
		case elliptic.P384():
			alg = jose.ES384
		case elliptic.P521():
			alg = jose.ES512
		default:
			return "", false
		}
	default:
		// Private keys, symmetric keys and other key types never verify
		// a core token.
		return "", false
	}
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return "", false
	}
	return alg, true
}
