package cli

import (
	"errors"
	"fmt"
)

// Exit codes of openfief, documented in docs/cli.md. Scripts such as
// `make demo` rely on them, so they never change meaning.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: anything not below, such as an API server or I/O failure.
	ExitFailure = 1
	// ExitUsage: wrong arguments or flags, or a file named by a flag that
	// cannot be read.
	ExitUsage = 2
	// ExitUnsigned: the image carries no signature that verifies (D-57).
	ExitUnsigned = 3
	// ExitUntrustedSigner: signatures verify, but none is by a trusted signer (D-45).
	ExitUntrustedSigner = 4
	// ExitManifestMismatch: the signed manifest label is missing, invalid, or
	// differs from the declared manifest (D-42).
	ExitManifestMismatch = 5
	// ExitInvalidImage: the reference is not pinned by digest, or the
	// registry holds no image under it that can be read.
	ExitInvalidImage = 6
	// ExitRegistryUnavailable: the registry could not be read, so whether
	// the image is signed is unknown; try again later.
	ExitRegistryUnavailable = 7
	// ExitInvalid: input refused before anything was written: a config that
	// does not match the schema, an invalid signers file, name or selector.
	ExitInvalid = 8
	// ExitNotFound: the named Plugin (or PluginGrant) does not exist.
	ExitNotFound = 9
	// ExitNothingToDo: nothing was changed because there was nothing to do
	// or the target already exists: nothing pending, already installed,
	// already at that image.
	ExitNothingToDo = 10
	// ExitNotConfirmed: a change that needs confirmation was declined, or
	// asked for without --yes where nobody can answer.
	ExitNotConfirmed = 11
	// ExitRegistryUnauthorized: the registry refused the read (401 or 403,
	// SignatureVerified reason RegistryUnauthorized): the image is private
	// or the reader has no access, so whether it is signed is unknown.
	ExitRegistryUnauthorized = 12
	// ExitAttention: `openfief status` found something that needs the
	// owner's attention; the list is its output.
	ExitAttention = 13
)

// quietError is an error whose exit code says it all, its output having
// said the rest: Main prints no "Error:" line for it.
type quietError interface {
	error
	quiet()
}

// ExitError is a command's failure with the exit code it maps to. Every
// error a command returns is one; anything else comes from argument parsing
// and exits with ExitUsage.
type ExitError struct {
	// Code is one of the Exit constants.
	Code int
	// Err says what went wrong; its message names the field or rule.
	Err error
}

func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

// exitf returns an *ExitError with a formatted message (%w allowed).
func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// withCode wraps err with code unless it already carries one.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: code, Err: err}
}

// ExitCode maps an error returned by a command to its exit code: ExitOK for
// nil, the code of an *ExitError, ExitUsage for anything else (cobra's own
// argument and flag errors).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitUsage
}
