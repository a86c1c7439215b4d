package plugins

import (
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The fuzzers below prove that outside input never panics a parser, and that
// what a parser accepts keeps the invariants the rest of the package relies
// on. Run one with: go test -run '^$' -fuzz '^FuzzX$' -fuzztime 60s .

func FuzzParseManifestLabel(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"capabilities":["connector"],"egress":["api.nbp.pl"],"secrets":[{"name":"s","mountPath":"/etc/s"}],"dataTiers":["t"],"configSchema":{"type":"object","maximum":1e2}}`,
			`{"capabilities":["connector"],"egress":["API.nbp.pl:443"],"secrets":[{"name":"s","mountPath":"/etc/s"}],"dataTiers":["t"],"configSchema":{"maximum":100,"type":"object"}}`},
		{`{"capabilities":["view","connector"]}`, `{"capabilities":["connector","view"],"egress":[]}`},
		{`{"capabilities":["connector"],"egress":["bücher.example:8443"]}`, `{"capabilities":["connector"],"egress":["xn--bcher-kva.example:8443"]}`},
		{`{"Capabilities":["connector"]}`, `{"capabilities":["connector"],"capabilities":["view"]}`},
		{`{"capabilities":["connector"]} {}`, "{\"capabilities\":[\"\xff\"]}"},
		{`{"capabilities":["connector"],"configSchema":{"a":{"a":{"a":[1,2,{"b":null}]}}}}`, `{"capabilities":["connector"],"configSchema":true}`},
		{`{"capabilities":["connector"],"configSchema":null}`, `{"capabilities":["connector"],"configSchema":{"type":"object","type":"array"}}`},
		{`{"capabilities":["connector"],"secrets":[{"name":"a","mountPath":"/a"},{"name":"b","mountPath":"/a/b"}]}`, `null`},
		{`{"capabilities":["connector"],"configSchema":{"m":-0.0e-0}}`, `{"capabilities":["connector"],"configSchema":{"m":0}}`},
		{`{"capabilities":["view"],"ownerEgress":1}`, `{"capabilities":["view"],"egress":[],"ownerEgress":1}`},
		{`{"capabilities":["view"],"ownerEgress":0}`, `{"capabilities":["view"]}`},
		{`{"capabilities":["view"],"ownerEgress":9}`, `{"capabilities":["view"],"ownerEgress":-1}`},
		{`{"capabilities":["view"],"ownerEgress":1.0}`, `{"capabilities":["view"],"ownerEgress":"1"}`},
		{`{"capabilities":["view"],"ownerEgress":null}`, `{"capabilities":["view"],"ownerEgress":1,"ownerEgress":2}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ma, errA := ParseManifestLabel(a)
		mb, errB := ParseManifestLabel(b)
		for _, err := range []error{errA, errB} {
			if err != nil && !errors.Is(err, ErrInvalidLabel) {
				t.Fatalf("error %v does not wrap ErrInvalidLabel", err)
			}
		}
		if errA != nil {
			return
		}
		if err := ma.Validate(); err != nil {
			t.Fatalf("ParseManifestLabel(%q) accepted an invalid manifest: %v", a, err)
		}
		if ma.OwnerEgress < 0 || ma.OwnerEgress > MaxOwnerEgress {
			t.Fatalf("ParseManifestLabel(%q) accepted %d owner egress slots", a, ma.OwnerEgress)
		}
		if !ma.Equal(ma) {
			t.Fatalf("a parsed manifest is not Equal to itself: %q", a)
		}
		// What the label says survives a trip through encoding/json, as the
		// Plugin's spec.manifest copy makes it.
		out, err := json.Marshal(ma)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := ParseManifestLabel(string(out))
		if err != nil {
			t.Fatalf("ParseManifestLabel(Marshal(%q)) = %v", a, err)
		}
		if !again.Equal(ma) {
			t.Fatalf("the re-encoded label %s is not Equal to %q", out, a)
		}
		if errB == nil && ma.Equal(mb) != mb.Equal(ma) {
			t.Fatalf("Equal is not symmetric for %q and %q", a, b)
		}
		if errB == nil && (ma.FirstDifference(mb) == "") != ma.Equal(mb) {
			t.Fatalf("FirstDifference says %q where Equal says %v for %q and %q", ma.FirstDifference(mb), ma.Equal(mb), a, b)
		}
	})
}

func FuzzParseCatalog(f *testing.F) {
	keyPEM := trPEM(f, trECKey(f, elliptic.P256()).Public())
	for _, seed := range []string{
		`{"plugins": []}`,
		`{"plugins": [` + trCatalogEntry("bank", "ghcr.io/acme/bank@"+trDigest('a'), "Acme", trSubject) + `]}`,
		`{"plugins": [` + trCatalogEntry("bank", "ghcr.io/acme/bank@"+trDigest('a'), "Acme", trSubject) + `,` + trCatalogEntry("fx", "mirror.example:5000/fx@"+trDigest('b'), "Acme", trSubject) + `]}`,
		fmt.Sprintf(`{"plugins": [{"name": "k", "image": "x.example/k@%s", "publisher": {"name": "K", "publicKey": %q}}]}`, trDigest('c'), keyPEM),
		`{"plugins": [{"name": "bank", "image": "ghcr.io/acme/bank@` + trDigest('a') + `", "publisher": {"name": "A", "issuer": "https://x.example", "subjectPattern": ".*"}}]}`,
		`{"plugins": [` + trCatalogEntry("bank", "ghcr.io/acme/bank@"+trDigest('a'), "Acme", trSubject) + `,` + trCatalogEntry("fx", "ghcr.io/acme/fx@"+trDigest('a'), "Acme", trSubject) + `]}`,
		`{"Plugins": []}`, `{"plugins": [], "plugins": []}`, `{"plugins": []} x`, `{"plugins": null}`, `null`, ``, "{\"plugins\": [\"\xff\"]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidCatalog) {
				t.Fatalf("error %v does not wrap ErrInvalidCatalog", err)
			}
			if c.Len() != 0 {
				t.Fatalf("a refused catalog holds %d entries", c.Len())
			}
			return
		}
		names := map[string]bool{}
		for _, e := range c.Entries() {
			if err := e.Publisher.Validate(); err != nil || e.Publisher.Kind != SignerPublisher || e.Publisher.Identity.SubjectPattern != "" {
				t.Fatalf("accepted publisher %+v: %v", e.Publisher, err)
			}
			if ValidateName(e.Name) != nil || names[e.Name] {
				t.Fatalf("accepted entry name %q twice or invalid", e.Name)
			}
			names[e.Name] = true
			if got, ok := c.Lookup(e.Image); !ok || got.Name != e.Name {
				t.Fatalf("Lookup(%s) = %q, %v; want %q", e.Image, got.Name, ok, e.Name)
			}
		}
		if _, err := NewTrustPolicy(c, nil); err != nil {
			t.Fatalf("NewTrustPolicy refused a parsed catalog: %v", err)
		}
	})
}

func FuzzParseOwnerSigners(f *testing.F) {
	keyPEM := trPEM(f, trECKey(f, elliptic.P256()).Public())
	for _, seed := range []string{
		`{"signers": []}`,
		`{"signers": [{"name": "me", "issuer": "https://token.actions.githubusercontent.com", "subjectPattern": "https://github\\.com/me/.*"}]}`,
		`{"signers": [{"name": "ci", "issuer": "https://gitlab.com", "subject": "project_path:me/p:ref_type:branch:ref:main"}]}`,
		fmt.Sprintf(`{"signers": [{"name": "laptop", "publicKey": %q}]}`, keyPEM),
		`{"signers": [{"name": "a", "issuer": "https://x.example", "subjectPattern": "a)|(b"}]}`,
		`{"signers": [{"name": "a", "issuer": "https://x.example", "subjectPattern": "(?m)a$"}]}`,
		`{"signers": [{"name": "a", "issuer": "https://x.example?q", "subject": "s"}]}`,
		`{"signers": [{"name": "a", "issuer": "https://x.example", "subject": "s"}, {"name": "a", "issuer": "https://x.example", "subject": "s"}]}`,
		`{"signers": [{"name": "a", "publicKey": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}]}`,
		`{"signers": [{"name": "openfief-ci", "issuer": "https://token.actions.githubusercontent.com", "subject": "s"}]}`,
		`{"signers": [{"name": "OpenFief", "issuer": "https://x.example", "subject": "s"}, {"name": "a", "issuer": "https://x.example", "subject": "s"}, {"name": "A", "issuer": "https://x.example", "subject": "t"}]}`,
		`{"Signers": []}`, `{"signers": [{"NAME": "a"}]}`, `{"signers": []}{}`, `{}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		signers, err := ParseOwnerSigners(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidSigner) || signers != nil {
				t.Fatalf("refusal %v does not wrap ErrInvalidSigner, or returned signers", err)
			}
			return
		}
		names := map[string]bool{}
		for _, s := range signers {
			key := signerNameKey(s.Name)
			if err := s.Validate(); err != nil || s.Kind != SignerOwner || names[key] {
				t.Fatalf("accepted signer %+v: %v", s, err)
			}
			if key == signerNameKey(ReservedSignerName) || strings.HasPrefix(key, signerNameKey(ReservedSignerPrefix)) {
				t.Fatalf("accepted the reserved name %q", s.Name)
			}
			names[key] = true
		}
		p, err := NewTrustPolicy(Catalog{}, signers)
		if err != nil {
			t.Fatalf("NewTrustPolicy refused parsed signers: %v", err)
		}
		img := trImage(t, "x.example/y", 'e')
		if _, err := p.Decide(SignedImage{Image: img}, nil); !errors.Is(err, ErrUnsigned) {
			t.Fatalf("owner signers %+v admitted an unsigned image: %v", signers, err)
		}
		// An exact or key signer matches a signature carrying its own identity.
		for _, s := range signers {
			id := s.Identity
			sig := SignatureIdentity{Issuer: id.Issuer, Subject: id.Subject, PublicKeyPEM: id.PublicKeyPEM}
			if id.SubjectPattern == "" && !id.Matches(sig) {
				t.Fatalf("signer %+v does not match its own identity", s)
			}
		}
	})
}

func FuzzSubjectPattern(f *testing.F) {
	for _, seed := range [][2]string{
		{`https://github\.com/me/.*`, "https://github.com/me/x"},
		{`a|b`, "ab"}, {`(?m)a$`, "a\nb"}, {`a)|(b`, "a-anything"}, {`(?s).`, "\n"}, {`\Aa`, "ab"}, {`x*`, ""}, {`[^a]`, "é"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		id := SignerIdentity{Issuer: trIssuer, SubjectPattern: pattern}
		matched := id.Matches(SignatureIdentity{Issuer: trIssuer, Subject: subject})
		if !matched {
			return
		}
		if id.Validate() != nil {
			t.Fatalf("an invalid pattern %q matched %q", pattern, subject)
		}
		// A match must span the whole subject: no shorter prefix or suffix
		// of it is what the pattern matched.
		re, err := compileSubjectPattern(pattern)
		if err != nil {
			t.Fatalf("compileSubjectPattern(%q): %v", pattern, err)
		}
		if loc := re.FindStringIndex(subject); loc == nil || loc[0] != 0 || loc[1] != len(subject) {
			t.Fatalf("pattern %q matched only %v of %q", pattern, loc, subject)
		}
		if id.Matches(SignatureIdentity{Issuer: trIssuer + "/", Subject: subject}) {
			t.Fatalf("pattern %q matched under another issuer", pattern)
		}
	})
}

func FuzzDecodeAllowLists(f *testing.F) {
	f.Add("bank", "api.example.com:443\nfiles.example.com:8443\n", "fx", "")
	f.Add("bank", "api.example.com:443\napi.example.com:443\n", "fx", "b.example:443")
	f.Add("bank", "API.example.com:443\n", "Fx", "xn--bcher-kva.example:443\n")
	f.Add("bank", "b.example:443\na.example:443\n", "fx", "\n")
	f.Add("bank", "a.example:443\r\n", "", "a.example\n")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		data := map[string]string{k1: v1, k2: v2}
		lists, err := DecodeAllowLists(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidAllowList) || lists != nil {
				t.Fatalf("refusal %v does not wrap ErrInvalidAllowList, or returned lists", err)
			}
			return
		}
		// The strict form is the canonical one: encoding what was decoded
		// gives back the very bytes, and decoding that gives the same lists.
		encoded := EncodeAllowLists(lists)
		if !reflect.DeepEqual(encoded, data) {
			t.Fatalf("EncodeAllowLists(DecodeAllowLists(%q)) = %q", data, encoded)
		}
		again, err := DecodeAllowLists(encoded)
		if err != nil || !reflect.DeepEqual(again, lists) {
			t.Fatalf("DecodeAllowLists(EncodeAllowLists(%q)) = %q, %v", lists, again, err)
		}
		for name, hosts := range lists {
			for _, h := range hosts {
				if !lists.Allows(name, h) {
					t.Fatalf("%q's list %q does not allow its own %q", name, hosts, h)
				}
			}
		}
	})
}

func FuzzEncodeAllowLists(f *testing.F) {
	f.Add("bank", "API.example.com\nfiles.example.com:8443\napi.example.com:443")
	f.Add("bank", "bücher.example\n*.example.com\n10.0.0.1\ncore")
	f.Fuzz(func(t *testing.T, name, hosts string) {
		if ValidateName(name) != nil {
			return
		}
		lists := AllowLists{name: strings.Split(hosts, "\n")}
		encoded := EncodeAllowLists(lists)
		decoded, err := DecodeAllowLists(encoded)
		if err != nil {
			t.Fatalf("DecodeAllowLists(EncodeAllowLists(%q)) = %v", lists, err)
		}
		if !reflect.DeepEqual(EncodeAllowLists(decoded), encoded) {
			t.Fatalf("encoding is not stable for %q", lists)
		}
	})
}

func FuzzPluginForServiceAccount(f *testing.F) {
	for _, seed := range []string{
		"system:serviceaccount:openfief:plugin-nbp-fx", "system:serviceaccount:openfief-x:plugin-a",
		"system:serviceaccount:openfief:openfief-core", "system:serviceaccount:openfief:plugin-",
		"system:serviceaccount:openfief:plugin-plugin-a", "system:serviceaccount:openfief:plugin-A", "nbp-fx",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if name, ok := PluginForServiceAccount(s); ok {
			if ValidateName(name) != nil || ServiceAccountUsername(name) != s {
				t.Fatalf("PluginForServiceAccount(%q) = %q, which does not map back", s, name)
			}
		} else if name != "" {
			t.Fatalf("a refusal returned %q", name)
		}
		// Read as a plugin name, s round-trips exactly when it is valid.
		name, ok := PluginForServiceAccount(ServiceAccountUsername(s))
		if valid := ValidateName(s) == nil; ok != valid || (ok && name != s) {
			t.Fatalf("PluginForServiceAccount(ServiceAccountUsername(%q)) = %q, %v; valid name: %v", s, name, ok, valid)
		}
	})
}

func FuzzParseTokenKeys(f *testing.F) {
	rsaKey := trRSAKey(f, 2048)
	ec := trECKey(f, elliptic.P256())
	ec521 := trECKey(f, elliptic.P521())
	for _, seed := range []string{
		trJWKS(trRSAJWK("rsa", &rsaKey.PublicKey)),
		trJWKS(trECJWK("ec", "ES256", &ec.PublicKey), trECJWK("ec521", "ES512", &ec521.PublicKey)),
		trJWKS(trRSAJWK("rsa", &rsaKey.PublicKey) + `,"d":"AQAB"`),
		trJWKS(`"kty":"oct","kid":"h","k":"c2VjcmV0"`),
		trJWKS(`"kty":"OKP","kid":"e","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"`),
		trJWKS(trECJWK("ec", "ES384", &ec.PublicKey)),
		trJWKS(trECJWK("a", "ES256", &ec.PublicKey), trECJWK("a", "ES256", &ec.PublicKey)),
		`{"keys":[]}`, `{"keys":null}`, `{"Keys":[]}`, `{"keys":[{"kty":"RSA","kid":"k","n":"AQAB","e":"AQAB"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := ParseTokenKeys(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidTokenKey) || ks.Len() != 0 {
				t.Fatalf("refusal %v does not wrap ErrInvalidTokenKey, or kept keys", err)
			}
			return
		}
		out := ks.JWKS()
		again, err := ParseTokenKeys(out)
		if err != nil {
			t.Fatalf("ParseTokenKeys(JWKS()) = %v for %s", err, out)
		}
		if !reflect.DeepEqual(again.Keys(), ks.Keys()) || string(again.JWKS()) != string(out) {
			t.Fatalf("JWKS does not round-trip: %s vs %s", out, again.JWKS())
		}
		if strings.Contains(string(out), `"d"`) || strings.Contains(string(out), `"k"`) {
			t.Fatalf("published private or symmetric material: %s", out)
		}
	})
}
