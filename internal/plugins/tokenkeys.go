package plugins

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// The ConfigMap the operator publishes the cluster's token-signing keys in,
// and its two keys, which every plugin pod mounts at
// /var/run/secrets/openfief-sa-jwks for the SDK (D-59).
const (
	TokenKeysConfigMap = "openfief-sa-jwks"
	TokenKeysJWKSKey   = "jwks.json"
	TokenKeysIssuerKey = "issuer"
)

// Bounds on a token key set.
const (
	maxTokenKeysLen = 1 << 20
	maxTokenKeys    = 64
	maxKeyIDLen     = 256
	maxRSAKeyBits   = 16384
	maxRSAExponent  = 1<<31 - 1
)

// TokenKey is one of the cluster's ServiceAccount token-signing public keys
// (D-59): its key ID, the algorithm the set names for it ("" when none), and
// the key itself, an *rsa.PublicKey or an *ecdsa.PublicKey.
type TokenKey struct {
	KeyID     string
	Algorithm string
	Key       crypto.PublicKey
}

// TokenKeys is a validated set of the keys that sign ServiceAccount tokens
// (not image signers: those are Signer and the trust policy), sorted by key
// ID, that the operator publishes for plugins in openfief-sa-jwks (D-59). The issuer is
// published beside it, not in it. Its fields are unexported: a TokenKeys
// comes from ParseTokenKeys.
type TokenKeys struct {
	keys []TokenKey
}

// privateJWKMembers are the JWK members that carry private or symmetric key
// material (RFC 7518 section 6).
var privateJWKMembers = [...]string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// ParseTokenKeys reads the API server's JWKS (/openid/v1/jwks) for
// publishing to plugins (D-59). It accepts only RSA public keys of at least
// 2048 bits and EC public keys on P-256, P-384 or P-521 (the point on its
// curve), each with a non-empty key ID unique in the set, "use" absent or
// "sig", "key_ops" absent or ["verify"], and "alg" absent or the algorithm
// the SDK allows for the key (RS256, ES256, ES384, ES512). A private or
// symmetric key, any other key type, a repeated JSON member or an empty set
// refuses the whole set, so the operator keeps what it published before.
// Members it does not need, such as x5c, are ignored and never republished.
// Errors are *FieldError values wrapping ErrInvalidTokenKey, with paths
// such as "keys[1].kty"; none holds key material.
func ParseTokenKeys(data []byte) (TokenKeys, error) {
	if len(data) > maxTokenKeysLen {
		return TokenKeys{}, keyErr("jwks", fmt.Sprintf("longer than %d bytes", maxTokenKeysLen))
	}
	var doc map[string]json.RawMessage
	if path, err := strictDecode(data, &doc); err != nil {
		return TokenKeys{}, keyErr(orDocument(path, "jwks"), err.Error())
	}
	if doc == nil {
		return TokenKeys{}, keyErr("jwks", "not a JSON object")
	}
	rawKeys, ok := doc["keys"]
	if !ok {
		return TokenKeys{}, keyErr("keys", "required")
	}
	var members []map[string]json.RawMessage
	if err := json.Unmarshal(rawKeys, &members); err != nil || members == nil {
		return TokenKeys{}, keyErr("keys", "not an array of JSON objects")
	}
	switch {
	case len(members) == 0:
		return TokenKeys{}, keyErr("keys", "no keys")
	case len(members) > maxTokenKeys:
		return TokenKeys{}, keyErr("keys", fmt.Sprintf("%d keys, at most %d", len(members), maxTokenKeys))
	}

	var errs fieldErrors
	var ks TokenKeys
	kids := map[string]int{}
	for i, m := range members {
		field := fmt.Sprintf("keys[%d]", i)
		if m == nil {
			errs.add(field, ErrInvalidTokenKey, "not a JSON object")
			continue
		}
		k, err := parseJWK(m)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				errs.add(field+"."+fe.Field, ErrInvalidTokenKey, fe.Detail)
			} else {
				errs.add(field, ErrInvalidTokenKey, err.Error())
			}
			continue
		}
		if j, dup := kids[k.KeyID]; dup {
			errs.add(field+".kid", ErrInvalidTokenKey, fmt.Sprintf("%q already names keys[%d]", k.KeyID, j))
			continue
		}
		kids[k.KeyID] = i
		ks.keys = append(ks.keys, k)
	}
	if err := errs.err(); err != nil {
		return TokenKeys{}, err
	}
	slices.SortFunc(ks.keys, func(a, b TokenKey) int { return strings.Compare(a.KeyID, b.KeyID) })
	return ks, nil
}

func keyErr(field, detail string) error {
	return &FieldError{Field: field, Err: ErrInvalidTokenKey, Detail: detail}
}

// parseJWK reads one JWK. A *FieldError it returns names the member.
func parseJWK(m map[string]json.RawMessage) (TokenKey, error) {
	for _, name := range privateJWKMembers {
		if _, ok := m[name]; ok {
			return TokenKey{}, keyErr(name, "private or symmetric key material; only public keys are published")
		}
	}
	str := func(name string, required bool) (string, error) {
		raw, ok := m[name]
		if !ok {
			if required {
				return "", keyErr(name, "required")
			}
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return "", keyErr(name, "not a JSON string")
		}
		if required && s == "" {
			return "", keyErr(name, "empty")
		}
		return s, nil
	}

	kty, err := str("kty", true)
	if err != nil {
		return TokenKey{}, err
	}
	kid, err := str("kid", true)
	if err != nil {
		return TokenKey{}, err
	}
	if len(kid) > maxKeyIDLen || !isPrintable(kid) {
		return TokenKey{}, keyErr("kid", fmt.Sprintf("not 1 to %d printable characters", maxKeyIDLen))
	}
	if use, err := str("use", false); err != nil {
		return TokenKey{}, err
	} else if _, present := m["use"]; present && use != "sig" {
		return TokenKey{}, keyErr("use", fmt.Sprintf("%q, want \"sig\"", use))
	}
	if raw, ok := m["key_ops"]; ok {
		var ops []string
		if err := json.Unmarshal(raw, &ops); err != nil || len(ops) != 1 || ops[0] != "verify" {
			return TokenKey{}, keyErr("key_ops", `want ["verify"]`)
		}
	}
	alg, err := str("alg", false)
	if err != nil {
		return TokenKey{}, err
	}

	var key crypto.PublicKey
	var want string
	switch kty {
	case "RSA":
		key, err = parseRSAJWK(str)
		want = "RS256"
	case "EC":
		var pub *ecdsa.PublicKey
		pub, err = parseECJWK(str)
		if pub != nil {
			key, want = pub, ecAlgorithm(pub.Curve)
		}
	case "oct":
		return TokenKey{}, keyErr("kty", "symmetric keys are never published")
	default:
		return TokenKey{}, keyErr("kty", fmt.Sprintf("%q is not RSA or EC", truncate(kty, 32)))
	}
	if err != nil {
		return TokenKey{}, err
	}
	if alg != "" && alg != want {
		return TokenKey{}, keyErr("alg", fmt.Sprintf("%q does not fit this key, want %s", truncate(alg, 32), want))
	}
	return TokenKey{KeyID: kid, Algorithm: alg, Key: key}, nil
}

// decodeB64URL decodes unpadded base64url strictly, as RFC 7515 writes it.
func decodeB64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

func parseRSAJWK(str func(string, bool) (string, error)) (crypto.PublicKey, error) {
	nStr, err := str("n", true)
	if err != nil {
		return nil, err
	}
	eStr, err := str("e", true)
	if err != nil {
		return nil, err
	}
	nb, err := decodeB64URL(nStr)
	if err != nil || len(nb) == 0 || nb[0] == 0 {
		return nil, keyErr("n", "not minimal unpadded base64url")
	}
	eb, err := decodeB64URL(eStr)
	if err != nil || len(eb) == 0 || eb[0] == 0 {
		return nil, keyErr("e", "not minimal unpadded base64url")
	}
	n := new(big.Int).SetBytes(nb)
	e := new(big.Int).SetBytes(eb)
	switch {
	case n.BitLen() < minRSAKeyBits || n.BitLen() > maxRSAKeyBits:
		return nil, keyErr("n", fmt.Sprintf("RSA modulus of %d bits, want %d to %d", n.BitLen(), minRSAKeyBits, maxRSAKeyBits))
	case n.Bit(0) == 0:
		return nil, keyErr("n", "RSA modulus is even")
	case !e.IsInt64() || e.Int64() < 3 || e.Int64() > maxRSAExponent || e.Bit(0) == 0:
		return nil, keyErr("e", "RSA exponent is not an odd number from 3 to 2^31-1")
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
}

func parseECJWK(str func(string, bool) (string, error)) (*ecdsa.PublicKey, error) {
	crv, err := str("crv", true)
	if err != nil {
		return nil, err
	}
	var curve elliptic.Curve
	switch crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, keyErr("crv", fmt.Sprintf("%q is not P-256, P-384 or P-521", truncate(crv, 32)))
	}
	size := (curve.Params().BitSize + 7) / 8
	point := []byte{4}
	for _, name := range [...]string{"x", "y"} {
		s, err := str(name, true)
		if err != nil {
			return nil, err
		}
		b, err := decodeB64URL(s)
		if err != nil || len(b) != size {
			return nil, keyErr(name, fmt.Sprintf("not %d bytes of unpadded base64url", size))
		}
		point = append(point, b...)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, keyErr("x", "the point is not on the curve")
	}
	return pub, nil
}

func ecAlgorithm(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	}
	return "ES512"
}

// Keys returns the keys, sorted by key ID.
func (k TokenKeys) Keys() []TokenKey { return slices.Clone(k.keys) }

// Len is the number of keys.
func (k TokenKeys) Len() int { return len(k.keys) }

// jwkJSON is one key as JWKS writes it; the member order is fixed.
type jwkJSON struct {
	Use string `json:"use"`
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg,omitempty"`
	Crv string `json:"crv,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

// JWKS renders the set as the canonical JWKS document the operator publishes
// under jwks.json (D-59): {"keys":[...]} sorted by key ID, every key with
// "use":"sig", its "kid", its "alg" when the source named one, and only its
// public parameters in minimal unpadded base64url. The same keys always give
// the same bytes, so an unchanged set causes no write.
func (k TokenKeys) JWKS() []byte {
	out := struct {
		Keys []jwkJSON `json:"keys"`
	}{Keys: make([]jwkJSON, 0, len(k.keys))}
	enc := base64.RawURLEncoding
	for _, key := range k.keys {
		j := jwkJSON{Use: "sig", Kid: key.KeyID, Alg: key.Algorithm}
		switch pub := key.Key.(type) {
		case *rsa.PublicKey:
			j.Kty = "RSA"
			j.N = enc.EncodeToString(pub.N.Bytes())
			j.E = enc.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
		case *ecdsa.PublicKey:
			j.Kty = "EC"
			j.Crv = pub.Curve.Params().Name
			point, err := pub.Bytes()
			if err != nil {
				continue // unreachable: ParseTokenKeys built it from a valid point
			}
			size := (len(point) - 1) / 2
			j.X = enc.EncodeToString(point[1 : 1+size])
			j.Y = enc.EncodeToString(point[1+size:])
		default:
			continue
		}
		out.Keys = append(out.Keys, j)
	}
	b, _ := json.Marshal(out) // cannot fail: strings only
	return b
}
