package cosign

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ErrRegistryUnavailable is wrapped by every *RegistryError: the registry
// could not be reached, timed out, or refused a read, so whether the image
// is signed is unknown (not "unsigned"). The operator reports
// SignatureVerified=Unknown (RegistryUnavailable) and retries (D-56, D-57).
var ErrRegistryUnavailable = errors.New("registry unavailable")

// ErrRegistryUnauthorized is wrapped by a *RegistryError whose registry
// answered 401 Unauthorized or 403 Forbidden, on the read itself or on its
// token endpoint: the registry refused the (so far anonymous) read, so the
// image is private or the reader has no access. Such an error wraps
// ErrRegistryUnavailable too, on purpose: whether the image is signed is
// still unknown, so everything that retries or fails static on
// ErrRegistryUnavailable keeps doing so. Callers that tell "no access" from
// "down" test ErrRegistryUnauthorized first.
var ErrRegistryUnauthorized = errors.New("registry refused the read (unauthorized)")

// Reasons a bundle is skipped. Each Skipped.Reason wraps one of them.
var (
	// ErrMalformedBundle: the referrer is not a readable Sigstore bundle v0.3
	// (bad JSON, wrong media type, too large, wrong manifest shape, or content
	// that does not match its digest).
	ErrMalformedBundle = errors.New("malformed bundle")
	// ErrUnverifiedBundle: the bundle parsed but did not verify: a bad
	// signature, a certificate outside the trust root or its validity window,
	// a missing transparency-log proof or timestamp, a statement over another
	// digest, or a key that is not trusted.
	ErrUnverifiedBundle = errors.New("bundle did not verify")
	// ErrPredicateType: the bundle's in-toto statement is not a cosign
	// signature (https://sigstore.dev/cosign/sign/v1), such as an SBOM or
	// provenance attestation, or it verified and is not a DSSE statement at
	// all. A DSSE statement's type is looked at before its signature: such a
	// bundle never counts, whoever signed it, so it is reported as of
	// another type whether or not it would verify.
	// For VerifyAttestations: a statement of another predicate type than
	// the one asked for.
	ErrPredicateType = errors.New("not a cosign signature statement")
	// ErrMalformedStatement (statement.go) is the reason of an attestation
	// whose statement ParseStatement refuses.
	//
	// ErrTooManyReferrers: the digest has more candidate referrers than the
	// verifier reads; the rest were not looked at.
	ErrTooManyReferrers = errors.New("too many referrers")
)

// ErrNoPlatform is returned for a signed image index that holds neither a
// linux/amd64 image nor exactly one platform image, so there is no image
// whose label could be read. The operator maps it to InvalidImage.
var ErrNoPlatform = errors.New("image index has no linux/amd64 image and more than one platform")

// RegistryError is a failed registry read. It wraps ErrRegistryUnavailable
// (and ErrRegistryUnauthorized for a 401 or 403) and the underlying error,
// so callers can test errors.Is(err, ErrRegistryUnavailable) and still read
// the HTTP status.
type RegistryError struct {
	// Op names the read that failed, such as "list referrers".
	Op string
	// Ref is the reference being read.
	Ref string
	// StatusCode is the HTTP status the registry answered, or 0 when it
	// could not be reached.
	StatusCode int
	// Err is the underlying error.
	Err error
}

func (e *RegistryError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s %s: registry answered %d: %v", e.Op, e.Ref, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.Ref, e.Err)
}

// Unwrap returns ErrRegistryUnavailable, ErrRegistryUnauthorized when the
// registry answered 401 or 403, and the underlying error.
func (e *RegistryError) Unwrap() []error {
	if e.Unauthorized() {
		return []error{ErrRegistryUnavailable, ErrRegistryUnauthorized, e.Err}
	}
	return []error{ErrRegistryUnavailable, e.Err}
}

// Unauthorized reports whether the registry refused the read: it answered
// 401 Unauthorized or 403 Forbidden, on the read or on its token endpoint.
func (e *RegistryError) Unauthorized() bool {
	return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
}

// registryError wraps err from a registry read as a *RegistryError.
func registryError(op, ref string, err error) error {
	re := &RegistryError{Op: op, Ref: ref, Err: quiet(err)}
	var te *transport.Error
	if errors.As(err, &te) {
		re.StatusCode = te.StatusCode
	}
	return re
}

// transient reports whether a failed read of one referrer's manifest or
// bundle blob is the registry's fault rather than that referrer's: the
// registry could not be reached, timed out, refused the anonymous read
// (401, 403) or failed (408, 429, 5xx). It fails the whole verification as a
// RegistryError, because an incomplete list of signatures could turn
// "verified" into "unverified" or "unsigned". Anything else (a 404 for that
// one object, content that does not match its digest, a body over the size
// cap) is the referrer's fault: it is skipped and reported.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode >= 500,
			te.StatusCode == http.StatusUnauthorized,
			te.StatusCode == http.StatusForbidden,
			te.StatusCode == http.StatusRequestTimeout,
			te.StatusCode == http.StatusTooManyRequests:
			return true
		}
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// quiet returns err with a registry's HTTP error described by its status and
// diagnostic codes only. go-containerregistry's transport.Error quotes the
// response body, which the registry chose: it must not reach a Plugin's
// condition message or the CLI's output. Errors without
// an HTTP answer are returned as they are. The result still unwraps to err.
func quiet(err error) error {
	var te *transport.Error
	if err == nil || !errors.As(err, &te) {
		return err
	}
	return &quietError{err: err, status: te.StatusCode, codes: diagnosticCodes(te)}
}

// quietError is an error whose text names an HTTP status and the registry's
// diagnostic codes, not the body.
type quietError struct {
	err    error
	status int
	codes  []string
}

func (q *quietError) Error() string {
	msg := fmt.Sprintf("registry answered %d %s", q.status, http.StatusText(q.status))
	if len(q.codes) > 0 {
		msg += " (" + strings.Join(q.codes, ", ") + ")"
	}
	return msg
}

func (q *quietError) Unwrap() error { return q.err }

// diagnosticCodes lists up to three of the registry's error codes, such as
// MANIFEST_UNKNOWN, when they are short upper-case identifiers; anything
// else a registry put there is left out.
func diagnosticCodes(te *transport.Error) []string {
	var codes []string
	for _, d := range te.Errors {
		c := string(d.Code)
		if len(codes) == 3 || c == "" || len(c) > 40 || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
			continue
		}
		codes = append(codes, c)
	}
	return codes
}
