package plugins

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SignerKind is which of D-45's three kinds of trusted signer a Signer is.
type SignerKind string

// The three kinds of trusted signer (D-45).
const (
	// SignerOpenFiefCI is OpenFief's own CI, always trusted (OpenFiefCI).
	SignerOpenFiefCI SignerKind = "OpenFiefCI"
	// SignerPublisher is a publisher pinned in the catalog (D-43, D-44).
	SignerPublisher SignerKind = "Publisher"
	// SignerOwner is a signer the owner added in openfief-trusted-signers.
	SignerOwner SignerKind = "Owner"
)

// Limits on what a signer identity may hold, so a hostile file cannot make
// the operator compile or compare something huge.
const (
	maxSignerNameLen     = 128
	maxIssuerLen         = 1024
	maxSubjectLen        = 1024
	maxSubjectPatternLen = 1024
	maxPublicKeyPEMLen   = 16 << 10
	minRSAKeyBits        = 2048
)

// The identity OpenFief's CI signs images with: GitHub Actions' OIDC issuer
// and the images.yml workflow on main (D-45).
const (
	// GitHubActionsIssuer is the OIDC issuer of GitHub Actions tokens.
	GitHubActionsIssuer = "https://token.actions.githubusercontent.com"
	// OpenFiefCISubject is the certificate subject of images.yml on main.
	OpenFiefCISubject = "https://github.com/arkadiuss/openfief/.github/workflows/images.yml@refs/heads/main"
)

// SignerIdentity is who a trusted signer is, in one of two forms (D-45). A
// keyless identity is an https OIDC Issuer with either an exact Subject or a
// SubjectPattern, an RE2 expression that must match the whole subject. A key
// identity is one PEM-encoded PKIX public key (RSA of at least 2048 bits,
// ECDSA on P-256, P-384 or P-521, or Ed25519). Exactly one form is set.
type SignerIdentity struct {
	// Issuer is the OIDC issuer of a keyless identity, an https URL.
	Issuer string
	// Subject is the exact certificate subject of a keyless identity.
	Subject string
	// SubjectPattern is an RE2 expression the whole subject must match; set
	// instead of Subject. Catalog publishers never use one (D-44).
	SubjectPattern string
	// PublicKeyPEM is the public key of a key identity.
	PublicKeyPEM string
}

// Signer is one trusted signer: a name to show, its kind (D-45) and the
// identity its signatures must carry.
type Signer struct {
	Name     string
	Kind     SignerKind
	Identity SignerIdentity
}

// OpenFiefCI is OpenFief's CI, which is always trusted (D-45): keyless, GitHub
// Actions' issuer and the exact subject of the images.yml workflow on main.
func OpenFiefCI() Signer {
	return Signer{
		Name: "openfief-ci",
		Kind: SignerOpenFiefCI,
		Identity: SignerIdentity{
			Issuer:  GitHubActionsIssuer,
			Subject: OpenFiefCISubject,
		},
	}
}

// IsKey reports whether the identity is the public-key form.
func (id SignerIdentity) IsKey() bool { return id.PublicKeyPEM != "" }

// Validate checks the identity is exactly one well-formed form (D-45). Errors
// are *FieldError values wrapping ErrInvalidSigner with paths relative to the
// identity ("issuer", "subjectPattern", "publicKey").
func (id SignerIdentity) Validate() error {
	_, errs := compileIdentity(id, "")
	return errs.err()
}

// Matches reports whether a verified signature's identity is this signer's.
// A keyless identity needs the exact issuer and a subject equal to Subject,
// or matched whole by SubjectPattern; a key identity needs the same public
// key. A keyless signature never matches a key identity, nor the reverse, and
// a malformed identity matches nothing (D-45, D-57).
func (id SignerIdentity) Matches(sig SignatureIdentity) bool {
	c, errs := compileIdentity(id, "")
	if len(errs) > 0 {
		return false
	}
	return c.matches(readSignature(sig))
}

// Validate checks the signer's name, kind and identity. Field paths start
// with "signer"; every problem wraps ErrInvalidSigner.
func (s Signer) Validate() error {
	_, errs := compileSigner(s, "signer")
	return errs.err()
}

// compiledIdentity is a SignerIdentity checked and made ready to match: the
// subject pattern compiled, the public key parsed to canonical DER.
type compiledIdentity struct {
	issuer  string
	subject string
	pattern *regexp.Regexp
	keyDER  []byte
}

// compiledSigner is a validated Signer with its compiled identity.
type compiledSigner struct {
	signer Signer
	id     compiledIdentity
}

func compileSigner(s Signer, prefix string) (compiledSigner, fieldErrors) {
	var errs fieldErrors
	if err := checkSignerName(s.Name); err != nil {
		errs.add(joinPath(prefix, "name"), ErrInvalidSigner, err.Error())
	} else if err := checkReservedSignerName(s); err != nil {
		errs.add(joinPath(prefix, "name"), ErrInvalidSigner, err.Error())
	}
	switch s.Kind {
	case SignerOpenFiefCI, SignerPublisher, SignerOwner:
	default:
		errs.add(joinPath(prefix, "kind"), ErrInvalidSigner, fmt.Sprintf("%q is not %s, %s or %s", s.Kind, SignerOpenFiefCI, SignerPublisher, SignerOwner))
	}
	id, idErrs := compileIdentity(s.Identity, prefix)
	errs = append(errs, idErrs...)
	return compiledSigner{signer: s, id: id}, errs
}

// checkSignerName requires a short, printable name: it is shown to people.
func checkSignerName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > maxSignerNameLen:
		return fmt.Errorf("longer than %d bytes", maxSignerNameLen)
	case !isPrintable(name):
		return fmt.Errorf("%q holds a control character or invalid UTF-8", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q starts or ends with white space", name)
	}
	return nil
}

func isPrintable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// compileIdentity validates id and prepares it for matching. prefix is the
// field path of the identity's fields.
func compileIdentity(id SignerIdentity, prefix string) (compiledIdentity, fieldErrors) {
	var errs fieldErrors
	keyless := id.Issuer != "" || id.Subject != "" || id.SubjectPattern != ""
	switch {
	case keyless && id.PublicKeyPEM != "":
		errs.add(joinPath(prefix, "publicKey"), ErrInvalidSigner, "set either a public key or an issuer with a subject, not both")
		return compiledIdentity{}, errs
	case !keyless && id.PublicKeyPEM == "":
		errs.add(joinPath(prefix, "issuer"), ErrInvalidSigner, "set an issuer with a subject or subjectPattern, or a public key")
		return compiledIdentity{}, errs
	case id.PublicKeyPEM != "":
		der, err := parsePublicKeyPEM(id.PublicKeyPEM)
		if err != nil {
			errs.add(joinPath(prefix, "publicKey"), ErrInvalidSigner, err.Error())
			return compiledIdentity{}, errs
		}
		return compiledIdentity{keyDER: der}, nil
	}

	if err := CheckIssuer(id.Issuer); err != nil {
		errs.add(joinPath(prefix, "issuer"), ErrInvalidSigner, err.Error())
	}
	c := compiledIdentity{issuer: id.Issuer}
	switch {
	case id.Subject != "" && id.SubjectPattern != "":
		errs.add(joinPath(prefix, "subjectPattern"), ErrInvalidSigner, "set either subject or subjectPattern, not both")
	case id.Subject == "" && id.SubjectPattern == "":
		errs.add(joinPath(prefix, "subject"), ErrInvalidSigner, "a keyless identity needs a subject or a subjectPattern")
	case id.Subject != "":
		if err := checkSubject(id.Subject); err != nil {
			errs.add(joinPath(prefix, "subject"), ErrInvalidSigner, err.Error())
		}
		c.subject = id.Subject
	default:
		re, err := compileSubjectPattern(id.SubjectPattern)
		if err != nil {
			errs.add(joinPath(prefix, "subjectPattern"), ErrInvalidSigner, err.Error())
		}
		c.pattern = re
	}
	if len(errs) > 0 {
		return compiledIdentity{}, errs
	}
	return c, nil
}

// CheckIssuer is the rule for an OIDC issuer identifier, as OpenID Connect
// Discovery defines it: an absolute https URL with a host, at most 1024
// bytes of printable UTF-8 without white space, and nothing an issuer may
// not carry (user info, query, fragment). A keyless signer's issuer follows
// it (D-45), and so does the API server's ServiceAccount issuer the operator
// publishes with the signing keys (D-59).
func CheckIssuer(issuer string) error {
	if len(issuer) > maxIssuerLen {
		return fmt.Errorf("longer than %d bytes", maxIssuerLen)
	}
	if !isPrintable(issuer) || strings.ContainsAny(issuer, " \t") {
		return fmt.Errorf("%q holds white space, a control character or invalid UTF-8", issuer)
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return fmt.Errorf("%q is not a URL", issuer)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("%q is not an https URL", issuer)
	case u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%q names no host", issuer)
	case u.User != nil:
		return fmt.Errorf("%q carries user info", issuer)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(issuer, "?#"):
		return fmt.Errorf("%q has a query or fragment", issuer)
	}
	return nil
}

func checkSubject(subject string) error {
	if len(subject) > maxSubjectLen {
		return fmt.Errorf("longer than %d bytes", maxSubjectLen)
	}
	if !isPrintable(subject) {
		return fmt.Errorf("%q holds a control character or invalid UTF-8", subject)
	}
	return nil
}

// compileSubjectPattern compiles an RE2 pattern so that it matches only a
// whole subject. The pattern must compile on its own first: wrapping an
// unbalanced pattern such as `a)|(b` would otherwise turn it into an
// alternation that matches any subject starting with "a".
func compileSubjectPattern(p string) (*regexp.Regexp, error) {
	if len(p) > maxSubjectPatternLen {
		return nil, fmt.Errorf("longer than %d bytes", maxSubjectPatternLen)
	}
	if !utf8.ValidString(p) {
		return nil, errors.New("not valid UTF-8")
	}
	if _, err := regexp.Compile(p); err != nil {
		return nil, fmt.Errorf("not an RE2 expression: %v", err)
	}
	re, err := regexp.Compile(`\A(?:` + p + `)\z`)
	if err != nil {
		return nil, fmt.Errorf("not an RE2 expression: %v", err)
	}
	return re, nil
}

// parsePublicKeyPEM reads exactly one PEM "PUBLIC KEY" block holding a PKIX
// RSA (at least 2048 bits), ECDSA (P-256, P-384, P-521) or Ed25519 key, and
// returns its canonical DER.
func parsePublicKeyPEM(s string) ([]byte, error) {
	if len(s) > maxPublicKeyPEMLen {
		return nil, fmt.Errorf("longer than %d bytes", maxPublicKeyPEMLen)
	}
	s = strings.TrimSpace(s)
	block, rest := pem.Decode([]byte(s))
	switch {
	case block == nil:
		return nil, errors.New("not a PEM block")
	case block.Type != "PUBLIC KEY":
		return nil, fmt.Errorf("PEM block is %q, want \"PUBLIC KEY\"", block.Type)
	case len(block.Headers) > 0:
		return nil, errors.New("PEM block has headers")
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, errors.New("more than one PEM block, or data after it")
	case !strings.HasPrefix(s, "-----BEGIN PUBLIC KEY-----"):
		return nil, errors.New("data before the PEM block")
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not a PKIX public key: %v", err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSAKeyBits {
			return nil, fmt.Errorf("RSA key of %d bits, want at least %d", k.N.BitLen(), minRSAKeyBits)
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return nil, fmt.Errorf("ECDSA curve %s is not P-256, P-384 or P-521", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the key: %v", err)
	}
	return der, nil
}

// signatureForm is a SignatureIdentity read once for matching against every
// trusted signer: keyless (issuer and subject) or key (canonical DER). A
// signature that is neither, or both, is malformed and matches nothing.
type signatureForm struct {
	keyless   bool
	issuer    string
	subject   string
	keyDER    []byte
	malformed bool
}

func readSignature(sig SignatureIdentity) signatureForm {
	switch {
	case sig.PublicKeyPEM == "" && sig.Issuer != "" && sig.Subject != "":
		return signatureForm{keyless: true, issuer: sig.Issuer, subject: sig.Subject}
	case sig.PublicKeyPEM != "" && sig.Issuer == "" && sig.Subject == "":
		der, err := parsePublicKeyPEM(sig.PublicKeyPEM)
		if err != nil {
			return signatureForm{malformed: true}
		}
		return signatureForm{keyDER: der}
	}
	return signatureForm{malformed: true}
}

// matches compares one read signature with a compiled identity. The zero
// compiledIdentity (what a malformed identity compiles to) matches nothing.
func (c compiledIdentity) matches(sig signatureForm) bool {
	switch {
	case sig.malformed:
		return false
	case c.keyDER != nil:
		return !sig.keyless && sig.keyDER != nil && bytes.Equal(c.keyDER, sig.keyDER)
	case c.issuer == "" || !sig.keyless || sig.issuer != c.issuer:
		return false
	case c.pattern != nil:
		return c.pattern.MatchString(sig.subject)
	default:
		return c.subject != "" && sig.subject == c.subject
	}
}
