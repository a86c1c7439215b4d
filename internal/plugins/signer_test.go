package plugins

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// trPEM encodes a public key as the PEM "PUBLIC KEY" block cosign writes.
func trPEM(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatalf("MarshalPKIXPublicKey: %v", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// trECKey returns a fresh ECDSA key on curve.
func trECKey(t testing.TB, curve elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatalf("GenerateKey: %v", err)
	}
	return k
}

// trRSAKey returns a fresh RSA key of bits.
func trRSAKey(t testing.TB, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatalf("rsa.GenerateKey: %v", err)
	}
	return k
}

// trErrFields lists the Field of every *FieldError in err, joined or wrapped.
func trErrFields(err error) []string {
	var fe *FieldError
	switch e := err.(type) {
	case nil:
		return nil
	case interface{ Unwrap() []error }:
		var out []string
		for _, x := range e.Unwrap() {
			out = append(out, trErrFields(x)...)
		}
		return out
	}
	if errors.As(err, &fe) {
		return []string{fe.Field}
	}
	return nil
}

// trCheckErr fails unless err is nil when wantErr is, or otherwise wraps
// wantErr and names wantField among its *FieldError paths.
func trCheckErr(t *testing.T, err, wantErr error, wantField string) {
	t.Helper()
	if wantErr == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %v at %q", wantErr, wantField)
	}
	if !errors.Is(err, wantErr) {
		t.Errorf("error %q does not wrap %q", err, wantErr)
	}
	if wantField != "" {
		fields := trErrFields(err)
		found := false
		for _, f := range fields {
			found = found || f == wantField
		}
		if !found {
			t.Errorf("error %q names fields %q, want %q among them", err, fields, wantField)
		}
	}
}

const (
	trIssuer  = "https://token.actions.githubusercontent.com"
	trSubject = "https://github.com/acme/plugin/.github/workflows/release.yml@refs/heads/main"
)

// TestCheckIssuer: the OIDC issuer rule of keyless signers and of the API
// server's ServiceAccount issuer (the operator's checkIssuer).
func TestCheckIssuer(t *testing.T) {
	tests := map[string]bool{
		trIssuer:                                       true,
		"https://accounts.example.com/realms/x":        true,
		"https://kubernetes.default.svc":               true,
		"https://kubernetes.default.svc.cluster.local": true,
		"https://oidc.example.com/id/ABC":              true,
		"":                                             false,
		"http://kubernetes.default.svc":                false,
		"kubernetes.default.svc":                       false,
		"https://":                                     false,
		"https:///path":                                false,
		"https:opaque":                                 false,
		"https://k8s?x=1":                              false,
		"https://k8s?":                                 false,
		"https://k8s#f":                                false,
		"https://user@k8s":                             false,
		"https://k8s/ a":                               false,
		"https://k8s/\ta":                              false,
		"https://k8s/\x00":                             false,
		"https://k8s/\xff":                             false,
		"https://k8s/" + strings.Repeat("a", maxIssuerLen): false,
	}
	for issuer, ok := range tests {
		if err := CheckIssuer(issuer); (err == nil) != ok {
			t.Errorf("CheckIssuer(%q) = %v, want ok=%v", issuer, err, ok)
		}
	}
}

func TestSignerIdentityValidate(t *testing.T) {
	ecPEM := trPEM(t, trECKey(t, elliptic.P256()).Public())
	p384PEM := trPEM(t, trECKey(t, elliptic.P384()).Public())
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	edPEM := trPEM(t, edPub)
	rsaPEM := trPEM(t, trRSAKey(t, 2048).Public())
	weakRSAPEM := trPEM(t, trRSAKey(t, 1024).Public())
	p224PEM := trPEM(t, trECKey(t, elliptic.P224()).Public())
	ecPriv, _ := x509.MarshalECPrivateKey(trECKey(t, elliptic.P256()))
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecPriv}))
	block, _ := pem.Decode([]byte(ecPEM))
	headerPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: block.Bytes}))

	tests := map[string]struct {
		id        SignerIdentity
		wantField string // "" when valid
	}{
		"keyless with an exact subject":       {id: SignerIdentity{Issuer: trIssuer, Subject: trSubject}},
		"keyless with a subject pattern":      {id: SignerIdentity{Issuer: trIssuer, SubjectPattern: `https://github\.com/acme/.+@refs/tags/v.*`}},
		"issuer with a path":                  {id: SignerIdentity{Issuer: "https://accounts.example.com/realms/x", Subject: "me@example.com"}},
		"ECDSA P-256 key":                     {id: SignerIdentity{PublicKeyPEM: ecPEM}},
		"ECDSA P-384 key":                     {id: SignerIdentity{PublicKeyPEM: p384PEM}},
		"Ed25519 key":                         {id: SignerIdentity{PublicKeyPEM: edPEM}},
		"RSA 2048 key":                        {id: SignerIdentity{PublicKeyPEM: rsaPEM}},
		"key surrounded by white space":       {id: SignerIdentity{PublicKeyPEM: "\n  " + ecPEM + "\n\n"}},
		"nothing set":                         {id: SignerIdentity{}, wantField: "issuer"},
		"key and issuer both":                 {id: SignerIdentity{Issuer: trIssuer, Subject: trSubject, PublicKeyPEM: ecPEM}, wantField: "publicKey"},
		"key and subject pattern":             {id: SignerIdentity{SubjectPattern: ".*", PublicKeyPEM: ecPEM}, wantField: "publicKey"},
		"subject without an issuer":           {id: SignerIdentity{Subject: trSubject}, wantField: "issuer"},
		"issuer without a subject":            {id: SignerIdentity{Issuer: trIssuer}, wantField: "subject"},
		"subject and pattern both":            {id: SignerIdentity{Issuer: trIssuer, Subject: trSubject, SubjectPattern: ".*"}, wantField: "subjectPattern"},
		"http issuer":                         {id: SignerIdentity{Issuer: "http://token.actions.githubusercontent.com", Subject: trSubject}, wantField: "issuer"},
		"issuer without a scheme":             {id: SignerIdentity{Issuer: "token.actions.githubusercontent.com", Subject: trSubject}, wantField: "issuer"},
		"issuer with a query":                 {id: SignerIdentity{Issuer: trIssuer + "?x=1", Subject: trSubject}, wantField: "issuer"},
		"issuer with an empty query":          {id: SignerIdentity{Issuer: trIssuer + "?", Subject: trSubject}, wantField: "issuer"},
		"issuer with a fragment":              {id: SignerIdentity{Issuer: trIssuer + "#x", Subject: trSubject}, wantField: "issuer"},
		"issuer with user info":               {id: SignerIdentity{Issuer: "https://me@token.actions.githubusercontent.com", Subject: trSubject}, wantField: "issuer"},
		"issuer without a host":               {id: SignerIdentity{Issuer: "https:///path", Subject: trSubject}, wantField: "issuer"},
		"opaque issuer":                       {id: SignerIdentity{Issuer: "https:opaque", Subject: trSubject}, wantField: "issuer"},
		"issuer with white space":             {id: SignerIdentity{Issuer: "https://example.com/a b", Subject: trSubject}, wantField: "issuer"},
		"subject with a control character":    {id: SignerIdentity{Issuer: trIssuer, Subject: "a\nb"}, wantField: "subject"},
		"subject too long":                    {id: SignerIdentity{Issuer: trIssuer, Subject: strings.Repeat("a", maxSubjectLen+1)}, wantField: "subject"},
		"pattern that is not RE2":             {id: SignerIdentity{Issuer: trIssuer, SubjectPattern: `(?=lookahead)`}, wantField: "subjectPattern"},
		"unbalanced pattern that would widen": {id: SignerIdentity{Issuer: trIssuer, SubjectPattern: `a)|(b`}, wantField: "subjectPattern"},
		"pattern too long":                    {id: SignerIdentity{Issuer: trIssuer, SubjectPattern: strings.Repeat("a", maxSubjectPatternLen+1)}, wantField: "subjectPattern"},
		"pattern with invalid UTF-8":          {id: SignerIdentity{Issuer: trIssuer, SubjectPattern: "a\xff"}, wantField: "subjectPattern"},
		"not PEM":                             {id: SignerIdentity{PublicKeyPEM: "ssh-ed25519 AAAA"}, wantField: "publicKey"},
		"private key PEM":                     {id: SignerIdentity{PublicKeyPEM: privPEM}, wantField: "publicKey"},
		"two keys":                            {id: SignerIdentity{PublicKeyPEM: ecPEM + edPEM}, wantField: "publicKey"},
		"data before the key":                 {id: SignerIdentity{PublicKeyPEM: "junk\n" + ecPEM}, wantField: "publicKey"},
		"data after the key":                  {id: SignerIdentity{PublicKeyPEM: ecPEM + "junk"}, wantField: "publicKey"},
		"PEM with headers":                    {id: SignerIdentity{PublicKeyPEM: headerPEM}, wantField: "publicKey"},
		"RSA 1024 key":                        {id: SignerIdentity{PublicKeyPEM: weakRSAPEM}, wantField: "publicKey"},
		"ECDSA P-224 key":                     {id: SignerIdentity{PublicKeyPEM: p224PEM}, wantField: "publicKey"},
		"PUBLIC KEY block of garbage":         {id: SignerIdentity{PublicKeyPEM: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}, wantField: "publicKey"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.id.Validate()
			if tc.wantField == "" {
				trCheckErr(t, err, nil, "")
				return
			}
			trCheckErr(t, err, ErrInvalidSigner, tc.wantField)
			if tc.id.Matches(SignatureIdentity{Issuer: tc.id.Issuer, Subject: tc.id.Subject, PublicKeyPEM: tc.id.PublicKeyPEM}) {
				t.Errorf("a malformed identity matched a signature")
			}
		})
	}
}

func TestSignerIdentityMatches(t *testing.T) {
	key := trECKey(t, elliptic.P256())
	keyPEM := trPEM(t, key.Public())
	otherPEM := trPEM(t, trECKey(t, elliptic.P256()).Public())
	// The same key written with CRLF line ends and surrounding space.
	reformatted := "  " + strings.ReplaceAll(keyPEM, "\n", "\r\n") + "\n"

	exact := SignerIdentity{Issuer: trIssuer, Subject: trSubject}
	pattern := SignerIdentity{Issuer: trIssuer, SubjectPattern: `https://github\.com/acme/[a-z-]+/\.github/workflows/release\.yml@refs/tags/v[0-9.]+`}
	keyless := func(subject string) SignatureIdentity { return SignatureIdentity{Issuer: trIssuer, Subject: subject} }
	tag := "https://github.com/acme/plugin/.github/workflows/release.yml@refs/tags/v1.2.3"

	tests := map[string]struct {
		id   SignerIdentity
		sig  SignatureIdentity
		want bool
	}{
		"exact subject":                        {exact, keyless(trSubject), true},
		"exact subject, other issuer":          {exact, SignatureIdentity{Issuer: "https://accounts.google.com", Subject: trSubject}, false},
		"exact subject, issuer with a slash":   {exact, SignatureIdentity{Issuer: trIssuer + "/", Subject: trSubject}, false},
		"exact subject, issuer in upper case":  {exact, SignatureIdentity{Issuer: strings.ToUpper(trIssuer), Subject: trSubject}, false},
		"exact subject, other subject":         {exact, keyless(strings.Replace(trSubject, "main", "dev", 1)), false},
		"exact subject, longer subject":        {exact, keyless(trSubject + "x"), false},
		"exact subject, prefix of the subject": {exact, keyless(trSubject[:20]), false},
		"pattern matches the whole subject":    {pattern, keyless(tag), true},
		"pattern, a fork's subject":            {pattern, keyless(strings.Replace(tag, "acme", "evil", 1)), false},
		"pattern, subject with a suffix":       {pattern, keyless(tag + "-evil"), false},
		"pattern, subject with a prefix":       {pattern, keyless("x" + tag), false},
		"pattern, subject on a new line":       {pattern, keyless(tag + "\nx"), false},
		"pattern, other issuer":                {pattern, SignatureIdentity{Issuer: "https://gitlab.com", Subject: tag}, false},
		"alternation must still match whole":   {SignerIdentity{Issuer: trIssuer, SubjectPattern: "a|b"}, keyless("ab"), false},
		"alternation matches one branch":       {SignerIdentity{Issuer: trIssuer, SubjectPattern: "a|b"}, keyless("b"), true},
		"multi-line flag cannot unanchor":      {SignerIdentity{Issuer: trIssuer, SubjectPattern: "(?m)a$"}, keyless("a\nb"), false},
		"empty-matching pattern, any subject":  {SignerIdentity{Issuer: trIssuer, SubjectPattern: "x*"}, keyless("y"), false},
		"keyless signature, key identity":      {SignerIdentity{PublicKeyPEM: keyPEM}, keyless(trSubject), false},
		"key signature, keyless identity":      {exact, SignatureIdentity{PublicKeyPEM: keyPEM}, false},
		"same key":                             {SignerIdentity{PublicKeyPEM: keyPEM}, SignatureIdentity{PublicKeyPEM: keyPEM}, true},
		"same key written differently":         {SignerIdentity{PublicKeyPEM: keyPEM}, SignatureIdentity{PublicKeyPEM: reformatted}, true},
		"other key":                            {SignerIdentity{PublicKeyPEM: keyPEM}, SignatureIdentity{PublicKeyPEM: otherPEM}, false},
		"signature with a key and an issuer":   {SignerIdentity{PublicKeyPEM: keyPEM}, SignatureIdentity{Issuer: trIssuer, Subject: trSubject, PublicKeyPEM: keyPEM}, false},
		"signature with a bad key":             {SignerIdentity{PublicKeyPEM: keyPEM}, SignatureIdentity{PublicKeyPEM: "junk"}, false},
		"signature without a subject":          {exact, SignatureIdentity{Issuer: trIssuer}, false},
		"empty signature":                      {exact, SignatureIdentity{}, false},
		"malformed identity, both forms":       {SignerIdentity{Issuer: trIssuer, Subject: trSubject, PublicKeyPEM: keyPEM}, keyless(trSubject), false},
		"malformed identity, http issuer":      {SignerIdentity{Issuer: "http://x.example", Subject: "s"}, SignatureIdentity{Issuer: "http://x.example", Subject: "s"}, false},
		"zero identity, empty signature":       {SignerIdentity{}, SignatureIdentity{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.id.Matches(tc.sig); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOpenFiefCI(t *testing.T) {
	ci := OpenFiefCI()
	if err := ci.Validate(); err != nil {
		t.Fatalf("OpenFiefCI is invalid: %v", err)
	}
	if ci.Kind != SignerOpenFiefCI || ci.Identity.SubjectPattern != "" || ci.Identity.IsKey() {
		t.Errorf("OpenFiefCI = %+v, want a keyless exact identity of kind %s", ci, SignerOpenFiefCI)
	}
	const workflow = "https://github.com/arkadiuss/openfief/.github/workflows/images.yml"
	tests := map[string]struct {
		sig  SignatureIdentity
		want bool
	}{
		"images.yml on main":           {SignatureIdentity{Issuer: "https://token.actions.githubusercontent.com", Subject: workflow + "@refs/heads/main"}, true},
		"images.yml on a branch":       {SignatureIdentity{Issuer: "https://token.actions.githubusercontent.com", Subject: workflow + "@refs/heads/feature"}, false},
		"images.yml on a pull request": {SignatureIdentity{Issuer: "https://token.actions.githubusercontent.com", Subject: workflow + "@refs/pull/1/merge"}, false},
		"another workflow on main":     {SignatureIdentity{Issuer: "https://token.actions.githubusercontent.com", Subject: "https://github.com/arkadiuss/openfief/.github/workflows/other.yml@refs/heads/main"}, false},
		"a fork's images.yml on main":  {SignatureIdentity{Issuer: "https://token.actions.githubusercontent.com", Subject: "https://github.com/evil/openfief/.github/workflows/images.yml@refs/heads/main"}, false},
		"another issuer":               {SignatureIdentity{Issuer: "https://accounts.google.com", Subject: workflow + "@refs/heads/main"}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ci.Identity.Matches(tc.sig); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSignerValidate(t *testing.T) {
	ok := SignerIdentity{Issuer: trIssuer, Subject: trSubject}
	tests := map[string]struct {
		s         Signer
		wantField string
	}{
		"valid":                   {s: Signer{Name: "Acme Corp", Kind: SignerOwner, Identity: ok}},
		"empty name":              {s: Signer{Kind: SignerOwner, Identity: ok}, wantField: "signer.name"},
		"name with a newline":     {s: Signer{Name: "a\nb", Kind: SignerOwner, Identity: ok}, wantField: "signer.name"},
		"name with edge spaces":   {s: Signer{Name: " a", Kind: SignerOwner, Identity: ok}, wantField: "signer.name"},
		"name too long":           {s: Signer{Name: strings.Repeat("a", maxSignerNameLen+1), Kind: SignerOwner, Identity: ok}, wantField: "signer.name"},
		"unknown kind":            {s: Signer{Name: "a", Kind: "Anyone", Identity: ok}, wantField: "signer.kind"},
		"bad identity":            {s: Signer{Name: "a", Kind: SignerPublisher, Identity: SignerIdentity{Issuer: trIssuer}}, wantField: "signer.subject"},
		"identity with no issuer": {s: Signer{Name: "a", Kind: SignerPublisher}, wantField: "signer.issuer"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.wantField == "" {
				trCheckErr(t, err, nil, "")
				return
			}
			trCheckErr(t, err, ErrInvalidSigner, tc.wantField)
		})
	}
}

func TestParseOwnerSigners(t *testing.T) {
	keyPEM := trPEM(t, trECKey(t, elliptic.P256()).Public())
	keyJSON := strings.ReplaceAll(keyPEM, "\n", `\n`)

	valid := `{"signers": [
		{"name": "me", "issuer": "https://token.actions.githubusercontent.com", "subjectPattern": "https://github\\.com/me/.*"},
		{"name": "laptop", "publicKey": "` + keyJSON + `"},
		{"name": "ci", "issuer": "https://gitlab.com", "subject": "https://gitlab.com/me/p//.gitlab-ci.yml@refs/heads/main"}
	]}`
	want := []Signer{
		{Name: "me", Kind: SignerOwner, Identity: SignerIdentity{Issuer: trIssuer, SubjectPattern: `https://github\.com/me/.*`}},
		{Name: "laptop", Kind: SignerOwner, Identity: SignerIdentity{PublicKeyPEM: keyPEM}},
		{Name: "ci", Kind: SignerOwner, Identity: SignerIdentity{Issuer: "https://gitlab.com", Subject: "https://gitlab.com/me/p//.gitlab-ci.yml@refs/heads/main"}},
	}
	got, err := ParseOwnerSigners([]byte(valid))
	if err != nil {
		t.Fatalf("ParseOwnerSigners(valid): %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseOwnerSigners(valid)\n got %+v\nwant %+v", got, want)
	}
	if got, err := ParseOwnerSigners([]byte(`{"signers": []}`)); err != nil || len(got) != 0 {
		t.Errorf("ParseOwnerSigners(no signers) = %v, %v; want none and no error", got, err)
	}

	sig := `{"name": "a", "issuer": "https://token.actions.githubusercontent.com", "subject": "s"}`
	tests := map[string]struct {
		in        string
		wantField string
	}{
		"empty input":                 {in: ``, wantField: OwnerSignersKey},
		"not JSON":                    {in: `signers: []`, wantField: OwnerSignersKey},
		"JSON null":                   {in: `null`, wantField: "signers"},
		"signers missing":             {in: `{}`, wantField: "signers"},
		"signers null":                {in: `{"signers": null}`, wantField: "signers"},
		"signers not a list":          {in: `{"signers": {}}`, wantField: "signers"},
		"unknown top-level field":     {in: `{"signers": [], "catalog": []}`, wantField: OwnerSignersKey},
		"field spelt in another case": {in: `{"Signers": []}`, wantField: OwnerSignersKey},
		"unknown signer field":        {in: `{"signers": [{"name": "a", "issuer": "https://x.example", "subject": "s", "kind": "OpenFiefCI"}]}`, wantField: "signers[0]"},
		"signer field in upper case":  {in: `{"signers": [{"NAME": "a", "issuer": "https://x.example", "subject": "s"}]}`, wantField: "signers[0]"},
		"repeated field":              {in: `{"signers": [{"name": "a", "issuer": "https://x.example", "subject": "s", "subject": "t"}]}`, wantField: "signers[0]"},
		"repeated top-level field":    {in: `{"signers": [], "signers": [` + sig + `]}`, wantField: OwnerSignersKey},
		"trailing data":               {in: `{"signers": []} {}`, wantField: OwnerSignersKey},
		"trailing garbage":            {in: `{"signers": []}x`, wantField: OwnerSignersKey},
		"invalid UTF-8":               {in: "{\"signers\": [{\"name\": \"\xff\"}]}", wantField: OwnerSignersKey},
		"name is a number":            {in: `{"signers": [{"name": 1}]}`, wantField: "signers.name"},
		"repeated name":               {in: `{"signers": [` + sig + `, ` + sig + `]}`, wantField: "signers[1].name"},
		"one bad signer of two":       {in: `{"signers": [` + sig + `, {"name": "b", "issuer": "http://x.example", "subject": "s"}]}`, wantField: "signers[1].issuer"},
		"bad pattern":                 {in: `{"signers": [{"name": "b", "issuer": "https://x.example", "subjectPattern": "("}]}`, wantField: "signers[0].subjectPattern"},
		"key and issuer":              {in: `{"signers": [{"name": "b", "issuer": "https://x.example", "subject": "s", "publicKey": "` + keyJSON + `"}]}`, wantField: "signers[0].publicKey"},
		"no identity":                 {in: `{"signers": [{"name": "b"}]}`, wantField: "signers[0].issuer"},
		"too large":                   {in: `{"signers": []}` + strings.Repeat(" ", maxTrustFileLen), wantField: OwnerSignersKey},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseOwnerSigners([]byte(tc.in))
			trCheckErr(t, err, ErrInvalidSigner, tc.wantField)
			if got != nil {
				t.Errorf("a refused file still returned signers: %+v", got)
			}
		})
	}
}
