package plugins

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

var trB64 = base64.RawURLEncoding

// trRSAJWK writes pub as a JWK member list (without braces) the way the API
// server does.
func trRSAJWK(kid string, pub *rsa.PublicKey) string {
	return `"use":"sig","kty":"RSA","kid":"` + kid + `","alg":"RS256","n":"` + trB64.EncodeToString(pub.N.Bytes()) + `","e":"` + trB64.EncodeToString(big.NewInt(int64(pub.E)).Bytes()) + `"`
}

// trECJWK writes pub as a JWK member list, with the algorithm alg.
func trECJWK(kid, alg string, pub *ecdsa.PublicKey) string {
	point, _ := pub.Bytes()
	size := (len(point) - 1) / 2
	return `"use":"sig","kty":"EC","kid":"` + kid + `","crv":"` + pub.Curve.Params().Name + `","alg":"` + alg + `","x":"` + trB64.EncodeToString(point[1:1+size]) + `","y":"` + trB64.EncodeToString(point[1+size:]) + `"`
}

func trJWKS(keys ...string) string {
	for i, k := range keys {
		keys[i] = "{" + k + "}"
	}
	return `{"keys":[` + strings.Join(keys, ",") + `]}`
}

func TestParseTokenKeys(t *testing.T) {
	rsaKey := trRSAKey(t, 2048)
	ec256 := trECKey(t, elliptic.P256())
	ec384 := trECKey(t, elliptic.P384())
	ec521 := trECKey(t, elliptic.P521())
	weak := trRSAKey(t, 1024)
	rsaJWK := trRSAJWK("rsa-1", &rsaKey.PublicKey)
	ecJWK := trECJWK("ec-1", "ES256", &ec256.PublicKey)

	t.Run("valid", func(t *testing.T) {
		in := trJWKS(
			ecJWK,
			rsaJWK+`,"x5c":["MIIB"],"x5t":"abc"`,
			trECJWK("ec-3", "ES512", &ec521.PublicKey),
			strings.Replace(trECJWK("ec-2", "ES384", &ec384.PublicKey), `"use":"sig",`, ``, 1),
		)
		ks, err := ParseTokenKeys([]byte(in))
		if err != nil {
			t.Fatalf("ParseTokenKeys: %v", err)
		}
		want := []TokenKey{
			{KeyID: "ec-1", Algorithm: "ES256", Key: &ec256.PublicKey},
			{KeyID: "ec-2", Algorithm: "ES384", Key: &ec384.PublicKey},
			{KeyID: "ec-3", Algorithm: "ES512", Key: &ec521.PublicKey},
			{KeyID: "rsa-1", Algorithm: "RS256", Key: &rsaKey.PublicKey},
		}
		got := ks.Keys()
		if len(got) != len(want) || ks.Len() != len(want) {
			t.Fatalf("Keys = %d keys, want %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			eq, _ := g.Key.(interface{ Equal(crypto.PublicKey) bool })
			if g.KeyID != w.KeyID || g.Algorithm != w.Algorithm || eq == nil || !eq.Equal(w.Key) {
				t.Errorf("key %d = %s %s %T, want %s %s", i, g.KeyID, g.Algorithm, g.Key, w.KeyID, w.Algorithm)
			}
		}

		// The canonical document: sorted by kid, use "sig", no x5c.
		out := ks.JWKS()
		if strings.Contains(string(out), "x5c") || strings.Count(string(out), `"use":"sig"`) != 4 {
			t.Errorf("JWKS = %s, want use sig on every key and no x5c", out)
		}
		again, err := ParseTokenKeys(out)
		if err != nil {
			t.Fatalf("ParseTokenKeys(JWKS()): %v", err)
		}
		if !reflect.DeepEqual(again.Keys(), got) || string(again.JWKS()) != string(out) {
			t.Errorf("JWKS does not round-trip:\n%s\n%s", out, again.JWKS())
		}
	})
	t.Run("without alg", func(t *testing.T) {
		ks, err := ParseTokenKeys([]byte(trJWKS(strings.Replace(rsaJWK, `"alg":"RS256",`, ``, 1))))
		if err != nil {
			t.Fatalf("ParseTokenKeys: %v", err)
		}
		if ks.Keys()[0].Algorithm != "" || strings.Contains(string(ks.JWKS()), "alg") {
			t.Errorf("an absent alg became %q in %s", ks.Keys()[0].Algorithm, ks.JWKS())
		}
	})

	point, _ := ec256.PublicKey.Bytes()
	offCurve := append([]byte(nil), point[33:]...)
	offCurve[len(offCurve)-1] ^= 1
	ecOffCurve := strings.Replace(ecJWK, trB64.EncodeToString(point[33:]), trB64.EncodeToString(offCurve), 1)
	nPadded := `"kty":"RSA","kid":"k","n":"` + base64.URLEncoding.EncodeToString(rsaKey.N.Bytes()) + `","e":"AQAB"`
	nLeadingZero := `"kty":"RSA","kid":"k","n":"` + trB64.EncodeToString(append([]byte{0}, rsaKey.N.Bytes()...)) + `","e":"AQAB"`
	nEven := `"kty":"RSA","kid":"k","n":"` + trB64.EncodeToString(new(big.Int).Add(rsaKey.N, big.NewInt(1)).Bytes()) + `","e":"AQAB"`
	withE := func(e string) string { return strings.Replace(rsaJWK, `"e":"AQAB"`, `"e":"`+e+`"`, 1) }

	tests := map[string]struct {
		in        string
		wantField string
	}{
		"empty input":                  {in: ``, wantField: "jwks"},
		"not JSON":                     {in: `keys`, wantField: "jwks"},
		"JSON null":                    {in: `null`, wantField: "jwks"},
		"an array":                     {in: `[]`, wantField: "jwks"},
		"keys missing":                 {in: `{}`, wantField: "keys"},
		"keys null":                    {in: `{"keys":null}`, wantField: "keys"},
		"keys not a list":              {in: `{"keys":{}}`, wantField: "keys"},
		"no keys":                      {in: `{"keys":[]}`, wantField: "keys"},
		"a key that is null":           {in: `{"keys":[null]}`, wantField: "keys[0]"},
		"a key that is a string":       {in: `{"keys":["k"]}`, wantField: "keys"},
		"keys spelt in another case":   {in: `{"Keys":[{` + rsaJWK + `}]}`, wantField: "keys"},
		"repeated member":              {in: trJWKS(ecJWK + `,"kid":"other"`), wantField: "keys[0]"},
		"trailing data":                {in: trJWKS(ecJWK) + `{}`, wantField: "jwks"},
		"invalid UTF-8":                {in: trJWKS(ecJWK + ",\"x5t\":\"\xff\""), wantField: "jwks"},
		"RSA private key":              {in: trJWKS(rsaJWK + `,"d":"AQAB"`), wantField: "keys[0].d"},
		"RSA private prime":            {in: trJWKS(rsaJWK + `,"p":"AQAB"`), wantField: "keys[0].p"},
		"EC private key":               {in: trJWKS(ecJWK + `,"d":"AQAB"`), wantField: "keys[0].d"},
		"symmetric key":                {in: trJWKS(`"kty":"oct","kid":"h","k":"c2VjcmV0"`), wantField: "keys[0].k"},
		"symmetric key without k":      {in: trJWKS(`"kty":"oct","kid":"h"`), wantField: "keys[0].kty"},
		"Ed25519 key":                  {in: trJWKS(`"kty":"OKP","kid":"e","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"`), wantField: "keys[0].kty"},
		"kty missing":                  {in: trJWKS(`"kid":"k","n":"AQAB","e":"AQAB"`), wantField: "keys[0].kty"},
		"kty is a number":              {in: trJWKS(`"kty":1,"kid":"k"`), wantField: "keys[0].kty"},
		"kty is null":                  {in: trJWKS(strings.Replace(rsaJWK, `"kty":"RSA"`, `"kty":null`, 1)), wantField: "keys[0].kty"},
		"kid missing":                  {in: trJWKS(strings.Replace(rsaJWK, `"kid":"rsa-1",`, ``, 1)), wantField: "keys[0].kid"},
		"kid empty":                    {in: trJWKS(strings.Replace(rsaJWK, `"kid":"rsa-1"`, `"kid":""`, 1)), wantField: "keys[0].kid"},
		"kid with a control character": {in: trJWKS(strings.Replace(rsaJWK, `"kid":"rsa-1"`, `"kid":"a\nb"`, 1)), wantField: "keys[0].kid"},
		"kid repeated":                 {in: trJWKS(rsaJWK, strings.Replace(ecJWK, `"kid":"ec-1"`, `"kid":"rsa-1"`, 1)), wantField: "keys[1].kid"},
		"use enc":                      {in: trJWKS(strings.Replace(rsaJWK, `"use":"sig"`, `"use":"enc"`, 1)), wantField: "keys[0].use"},
		"use empty":                    {in: trJWKS(strings.Replace(rsaJWK, `"use":"sig"`, `"use":""`, 1)), wantField: "keys[0].use"},
		"key_ops verify":               {in: trJWKS(rsaJWK + `,"key_ops":["sign"]`), wantField: "keys[0].key_ops"},
		"alg HS256":                    {in: trJWKS(strings.Replace(rsaJWK, `"alg":"RS256"`, `"alg":"HS256"`, 1)), wantField: "keys[0].alg"},
		"alg none":                     {in: trJWKS(strings.Replace(rsaJWK, `"alg":"RS256"`, `"alg":"none"`, 1)), wantField: "keys[0].alg"},
		"alg PS256":                    {in: trJWKS(strings.Replace(rsaJWK, `"alg":"RS256"`, `"alg":"PS256"`, 1)), wantField: "keys[0].alg"},
		"EC alg for another curve":     {in: trJWKS(trECJWK("k", "ES384", &ec256.PublicKey)), wantField: "keys[0].alg"},
		"RSA 1024":                     {in: trJWKS(trRSAJWK("k", &weak.PublicKey)), wantField: "keys[0].n"},
		"n padded":                     {in: trJWKS(nPadded), wantField: "keys[0].n"},
		"n with a leading zero":        {in: trJWKS(nLeadingZero), wantField: "keys[0].n"},
		"n even":                       {in: trJWKS(nEven), wantField: "keys[0].n"},
		"n in standard base64":         {in: trJWKS(`"kty":"RSA","kid":"k","n":"` + base64.RawStdEncoding.EncodeToString(rsaKey.N.Bytes()) + `a+/","e":"AQAB"`), wantField: "keys[0].n"},
		"e missing":                    {in: trJWKS(strings.Replace(rsaJWK, `,"e":"AQAB"`, ``, 1)), wantField: "keys[0].e"},
		"e of 1":                       {in: trJWKS(withE("AQ")), wantField: "keys[0].e"},
		"e even":                       {in: trJWKS(withE("AQAA")), wantField: "keys[0].e"},
		"e above 2^31-1":               {in: trJWKS(withE(trB64.EncodeToString(big.NewInt(1<<32 + 1).Bytes()))), wantField: "keys[0].e"},
		"e with a leading zero":        {in: trJWKS(withE("AAEAAQ")), wantField: "keys[0].e"},
		"EC curve P-224":               {in: trJWKS(strings.Replace(ecJWK, `"crv":"P-256"`, `"crv":"P-224"`, 1)), wantField: "keys[0].crv"},
		"EC curve secp256k1":           {in: trJWKS(strings.Replace(ecJWK, `"crv":"P-256"`, `"crv":"secp256k1"`, 1)), wantField: "keys[0].crv"},
		"EC curve missing":             {in: trJWKS(strings.Replace(ecJWK, `"crv":"P-256",`, ``, 1)), wantField: "keys[0].crv"},
		"EC point off the curve":       {in: trJWKS(ecOffCurve), wantField: "keys[0].x"},
		"EC x too short":               {in: trJWKS(strings.Replace(ecJWK, `"x":"`, `"x":"AA`, 1)), wantField: "keys[0].x"},
		"EC y missing":                 {in: trJWKS(ecJWK[:strings.Index(ecJWK, `,"y"`)]), wantField: "keys[0].y"},
		"one bad key refuses all":      {in: trJWKS(rsaJWK, ecJWK+`,"d":"AQAB"`), wantField: "keys[1].d"},
		"too many keys":                {in: trJWKS(strings.Split(strings.Repeat(ecJWK+"\x00", maxTokenKeys+1), "\x00")[:maxTokenKeys+1]...), wantField: "keys"},
		"too large":                    {in: trJWKS(ecJWK) + strings.Repeat(" ", maxTokenKeysLen), wantField: "jwks"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ks, err := ParseTokenKeys([]byte(tc.in))
			trCheckErr(t, err, ErrInvalidTokenKey, tc.wantField)
			if ks.Len() != 0 {
				t.Errorf("a refused set still holds %d keys", ks.Len())
			}
			if err != nil && strings.Contains(err.Error(), "AQAB") {
				t.Errorf("error %q repeats key material", err)
			}
		})
	}
}

// TestTokenKeysJWKSShape checks the published document is what the SDK's
// go-jose reads: {"keys":[...]} with the RFC 7517 member names.
func TestTokenKeysJWKSShape(t *testing.T) {
	ec := trECKey(t, elliptic.P256())
	ks, err := ParseTokenKeys([]byte(trJWKS(trECJWK("b", "ES256", &ec.PublicKey), strings.Replace(trECJWK("a", "ES256", &ec.PublicKey), `"alg":"ES256",`, ``, 1))))
	if err != nil {
		t.Fatalf("ParseTokenKeys: %v", err)
	}
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(ks.JWKS(), &doc); err != nil {
		t.Fatalf("JWKS is not JSON: %v", err)
	}
	point, _ := ec.PublicKey.Bytes()
	want := []map[string]string{
		{"use": "sig", "kty": "EC", "kid": "a", "crv": "P-256", "x": trB64.EncodeToString(point[1:33]), "y": trB64.EncodeToString(point[33:])},
		{"use": "sig", "kty": "EC", "kid": "b", "alg": "ES256", "crv": "P-256", "x": trB64.EncodeToString(point[1:33]), "y": trB64.EncodeToString(point[33:])},
	}
	if !reflect.DeepEqual(doc.Keys, want) {
		t.Errorf("JWKS keys\n got %v\nwant %v", doc.Keys, want)
	}
	var zero TokenKeys
	if got := string(zero.JWKS()); got != `{"keys":[]}` {
		t.Errorf("zero JWKS = %s", got)
	}
}
