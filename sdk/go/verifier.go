// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// The files of the openfief-sa-jwks ConfigMap.
const (
	// JWKSFileName holds the cluster's token-signing public keys as a JSON
	// Web Key Set.
	JWKSFileName = "jwks.json"
	// IssuerFileName holds the cluster's ServiceAccount token issuer.
	IssuerFileName = "issuer"
)

// Leeway is the clock skew allowed when checking a token's expiry, not-before
// and issued-at times.
const Leeway = time.Minute

// maxTokenLength bounds the bearer tokens Verify parses; a Kubernetes token
// is a few kilobytes.
const maxTokenLength = 16 << 10

// maxJWKSBytes and maxIssuerBytes bound the two files the verifier reads.
const (
	maxJWKSBytes   = 1 << 20
	maxIssuerBytes = 4 << 10
)

// ErrTokenRefused wraps every reason Verify refuses a token, for errors.Is.
var ErrTokenRefused = errors.New("token refused")

// CoreVerifier decides whether a bearer token proves that the core is
// calling this plugin instance. RequireCore consults it before any
// handler runs. Implementations must be safe for concurrent use.
type CoreVerifier interface {
	// Verify returns nil only for a token the core holds for this
	// instance. Its error never contains the token.
	Verify(token string) error
}

// InstanceAudience is the audience of the tokens the core sends to the
// plugin instance name: "openfief-plugin:<name>".
func InstanceAudience(name string) string { return "openfief-plugin:" + name }

// JWKSVerifier is the SDK's CoreVerifier: it checks a core token's
// signature with go-jose against the cluster's public keys in jwks.json, and
// its claims against the issuer in issuer, the core's ServiceAccount as
// subject, this instance's audience and an expiry, with one minute of
// leeway. Every call looks at both files through an os.Root of their
// directory: it stats them, and reads them again when their stamp (device,
// inode, size, modification and change time) differs from the one they were
// read with, or when that read came less than two seconds after their last
// change; the bytes are parsed again only when they differ. A key the
// operator rotates or retires therefore counts from the first call after the
// kubelet updates the mount, with no delay added by the cache.
type JWKSVerifier struct {
	dir      string
	audience string
	subject  string
	// now is the clock for the token's times and for how old a file's
	// last change is.
	now func() time.Time

	// current is the key set with the stamps of the files it was read
	// from; a call whose stat finds the same stamps uses it unread.
	current atomic.Pointer[stampedKeySet]

	mu     sync.Mutex
	cached *keySet
}

// stampedKeySet is a key set and the stamps of the two files, taken on the
// open files it was read from. trusted is false when either stamp may be
// shared with a later write (fileStamp.settled); the files are then read on
// every call until a read finds them settled.
type stampedKeySet struct {
	ks           *keySet
	jwks, issuer fileStamp
	trusted      bool
}

// keySet is one parse of the two files, kept with the bytes it came from.
type keySet struct {
	rawJWKS, rawIssuer []byte
	issuer             string
	keys               map[string]verifyKey
	err                error
}

// NewCoreVerifier builds the JWKSVerifier the operator configured: instance
// from OPENFIEF_INSTANCE, subject from OPENFIEF_CORE_SUBJECT and the key
// directory from OPENFIEF_SA_JWKS_DIR, or DefaultSAJWKSDir when unset.
func NewCoreVerifier() (*JWKSVerifier, error) {
	dir := os.Getenv(EnvSAJWKSDir)
	if dir == "" {
		dir = DefaultSAJWKSDir
	}
	return NewJWKSVerifier(dir, os.Getenv(EnvInstance), os.Getenv(EnvCoreSubject))
}

// NewJWKSVerifier returns a verifier of core tokens for the plugin instance
// named instance, sent by the ServiceAccount username subject, with the
// openfief-sa-jwks files in dir. The files need not exist yet: every
// Verify reads them.
func NewJWKSVerifier(dir, instance, subject string) (*JWKSVerifier, error) {
	switch {
	case dir == "":
		return nil, errors.New("jwks verifier: no key directory")
	case instance == "":
		return nil, fmt.Errorf("jwks verifier: no instance name (%s)", EnvInstance)
	case subject == "":
		return nil, fmt.Errorf("jwks verifier: no core subject (%s)", EnvCoreSubject)
	}
	return &JWKSVerifier{dir: dir, audience: InstanceAudience(instance), subject: subject, now: time.Now}, nil
}

// Verify returns nil when token is a JWT signed with one of
// allowedAlgorithms by the mounted key its key ID names, issued by the
// mounted issuer to the core's subject for this instance's audience, and not
// expired. Every refusal wraps ErrTokenRefused; none contains the
// token.
func (v *JWKSVerifier) Verify(token string) error {
	if err := v.verify(token); err != nil {
		return fmt.Errorf("%w: %w", ErrTokenRefused, err)
	}
	return nil
}

func (v *JWKSVerifier) verify(token string) error {
	if token == "" {
		return errors.New("no token")
	}
	if len(token) > maxTokenLength {
		return errors.New("token too long")
	}
	// ParseSigned refuses any algorithm outside the list, so "none" and
	// HMAC never reach a key.
	tok, err := jwt.ParseSigned(token, allowedAlgorithms)
	if err != nil {
		return errors.New("not a JWS with an allowed algorithm")
	}
	if len(tok.Headers) != 1 {
		return errors.New("not exactly one signature")
	}
	h := tok.Headers[0]
	if h.KeyID == "" {
		return errors.New("no key ID")
	}
	ks, err := v.keys()
	if err != nil {
		return err
	}
	key, ok := ks.keys[h.KeyID]
	if !ok {
		return errors.New("unknown key ID")
	}
	if string(key.alg) != h.Algorithm {
		return errors.New("algorithm does not fit the key")
	}
	var claims jwt.Claims
	if err := tok.Claims(key.key, &claims); err != nil {
		return errors.New("bad signature")
	}
	if claims.Expiry == nil {
		return errors.New("no expiry")
	}
	err = claims.ValidateWithLeeway(jwt.Expected{
		Issuer:      ks.issuer,
		Subject:     v.subject,
		AnyAudience: jwt.Audience{v.audience},
		Time:        v.now(),
	}, Leeway)
	if err != nil {
		// go-jose's claim errors name the claim, never its value.
		return err
	}
	return nil
}

// keys returns the parsed key set. When the files' stamps are those of the
// last read, and that read was trusted, the files are not read; otherwise
// both are read, and parsed again only when their bytes differ from the last
// parse.
func (v *JWKSVerifier) keys() (*keySet, error) {
	if cur := v.current.Load(); cur != nil && cur.trusted && cur.unchanged(v.dir) {
		return cur.ks, cur.ks.err
	}
	root, err := os.OpenRoot(v.dir)
	if err != nil {
		return nil, fmt.Errorf("open key directory: %w", err)
	}
	defer root.Close()
	// Taken before the files are opened: a change after it leaves a change
	// time no earlier than it, less the file system's granularity.
	readAt := v.now()
	rawIssuer, issuerStamp, err := readRootFileStamped(root, IssuerFileName, maxIssuerBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", IssuerFileName, err)
	}
	rawJWKS, jwksStamp, err := readRootFileStamped(root, JWKSFileName, maxJWKSBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", JWKSFileName, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	ks := v.cached
	if ks == nil || !bytes.Equal(ks.rawJWKS, rawJWKS) || !bytes.Equal(ks.rawIssuer, rawIssuer) {
		ks = parseKeySet(rawJWKS, rawIssuer)
		v.cached = ks
	}
	v.current.Store(&stampedKeySet{
		ks:      ks,
		jwks:    jwksStamp,
		issuer:  issuerStamp,
		trusted: jwksStamp.settled(readAt) && issuerStamp.settled(readAt),
	})
	return ks, ks.err
}

// unchanged reports whether both files in dir still have the stamps s was
// read with. A file that cannot be stat'ed counts as changed, so the read
// that follows reports the error. The stat is one system call on the path,
// not a walk through an os.Root: a stamp names a device and inode, so an
// equal stamp means the path leads to the very file the os.Root read, which
// has not changed since; any other file, wherever a link leads, differs and
// is read through the os.Root.
func (s *stampedKeySet) unchanged(dir string) bool {
	for _, f := range []struct {
		name  string
		stamp fileStamp
	}{{JWKSFileName, s.jwks}, {IssuerFileName, s.issuer}} {
		fi, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil || stampOf(fi) != f.stamp {
			return false
		}
	}
	return true
}

func parseKeySet(rawJWKS, rawIssuer []byte) *keySet {
	ks := &keySet{rawJWKS: rawJWKS, rawIssuer: rawIssuer}
	ks.issuer = string(bytes.TrimSpace(rawIssuer))
	if ks.issuer == "" {
		ks.err = fmt.Errorf("%s is empty", IssuerFileName)
		return ks
	}
	ks.keys, ks.err = parseSigningKeys(rawJWKS)
	return ks
}
