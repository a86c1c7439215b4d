package plugins

import (
	"fmt"
	"strconv"
	"strings"
)

// ImageRef is an image reference pinned by digest: repository@sha256:<hex>
// with an optional registry host and port (D-17). Its fields are unexported,
// so an ImageRef obtained from ParseImageRef is always valid.
type ImageRef struct {
	registry   string // host[:port], empty when the reference names none
	repository string // path components joined by '/'
	digest     string // "sha256:<64 lower-case hex>"
}

// maxImageRefLen bounds what ParseImageRef reads; registries refuse longer names.
const maxImageRefLen = 1024

// ParseImageRef parses repository@sha256:<64 lower-case hex digits>, with an
// optional registry host[:port] in front, following the OCI distribution name
// grammar. A tag is refused, even next to a digest, since an image named both
// ways is ambiguous (D-17).
func ParseImageRef(s string) (ImageRef, error) {
	if s == "" {
		return ImageRef{}, fmt.Errorf("%w: empty", ErrInvalidImage)
	}
	if len(s) > maxImageRefLen {
		return ImageRef{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidImage, maxImageRefLen)
	}
	name, digest, ok := strings.Cut(s, "@")
	if !ok {
		return ImageRef{}, fmt.Errorf("%w: %q is not pinned by digest (want repository@sha256:<64 hex>)", ErrInvalidImage, s)
	}
	if err := checkDigest(digest); err != nil {
		return ImageRef{}, err
	}
	registry, repo := splitRegistry(name)
	if i := strings.LastIndexByte(repo, ':'); i >= 0 {
		return ImageRef{}, fmt.Errorf("%w: %q names tag %q beside its digest; use the digest alone", ErrInvalidImage, s, repo[i+1:])
	}
	if registry != "" {
		if err := checkRegistry(registry); err != nil {
			return ImageRef{}, err
		}
	}
	if err := checkRepository(repo); err != nil {
		return ImageRef{}, err
	}
	return ImageRef{registry: registry, repository: repo, digest: digest}, nil
}

// splitRegistry separates a leading registry host from the repository path.
// As in Docker and the OCI tooling, the first component is a registry when it
// holds a '.' or a ':' or is "localhost".
func splitRegistry(name string) (registry, repo string) {
	first, rest, ok := strings.Cut(name, "/")
	if !ok {
		return "", name
	}
	if first == "localhost" || strings.ContainsAny(first, ".:") {
		return first, rest
	}
	return "", name
}

func checkDigest(d string) error {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok {
		return fmt.Errorf("%w: digest %q is not sha256", ErrInvalidImage, d)
	}
	if len(hex) != 64 {
		return fmt.Errorf("%w: digest has %d hex digits, want 64", ErrInvalidImage, len(hex))
	}
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%w: digest is not lower-case hex", ErrInvalidImage)
		}
	}
	return nil
}

// checkRegistry accepts host[:port] where host is a DNS name (labels of
// letters, digits and '-') or "localhost", and port is 1 to 65535.
func checkRegistry(r string) error {
	host, port, hasPort := strings.Cut(r, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("%w: registry port %q is not 1 to 65535", ErrInvalidImage, port)
		}
	}
	if host == "" || len(host) > 253 {
		return fmt.Errorf("%w: registry host %q", ErrInvalidImage, host)
	}
	for _, label := range strings.Split(host, ".") {
		if !isDNSLabel(label, 63) {
			return fmt.Errorf("%w: registry host %q is not a DNS name", ErrInvalidImage, host)
		}
	}
	return nil
}

// checkRepository applies the OCI name grammar: components of lower-case
// letters and digits, separated inside a component by '.', one or two '_', or
// any number of '-'; components joined by '/'.
func checkRepository(repo string) error {
	if repo == "" {
		return fmt.Errorf("%w: empty repository", ErrInvalidImage)
	}
	if len(repo) > 255 {
		return fmt.Errorf("%w: repository longer than 255 bytes", ErrInvalidImage)
	}
	for _, comp := range strings.Split(repo, "/") {
		if !isPathComponent(comp) {
			return fmt.Errorf("%w: repository component %q breaks the OCI name grammar", ErrInvalidImage, comp)
		}
	}
	return nil
}

// isPathComponent matches [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*.
func isPathComponent(c string) bool {
	if c == "" {
		return false
	}
	alnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	i := 0
	for {
		start := i
		for i < len(c) && alnum(c[i]) {
			i++
		}
		if i == start {
			return false
		}
		if i == len(c) {
			return true
		}
		switch c[i] {
		case '.':
			i++
		case '_':
			i++
			if i < len(c) && c[i] == '_' {
				i++
			}
		case '-':
			for i < len(c) && c[i] == '-' {
				i++
			}
		default:
			return false
		}
	}
}

// Registry is the registry host[:port], or "" when the reference names none.
func (r ImageRef) Registry() string { return r.registry }

// Repository is the repository path without registry or digest.
func (r ImageRef) Repository() string { return r.repository }

// Digest is "sha256:<64 hex>".
func (r ImageRef) Digest() string { return r.digest }

// Name is the registry and repository without the digest.
func (r ImageRef) Name() string {
	if r.registry == "" {
		return r.repository
	}
	return r.registry + "/" + r.repository
}

// String is the reference in the form ParseImageRef reads.
func (r ImageRef) String() string {
	if r.digest == "" {
		return ""
	}
	return r.Name() + "@" + r.digest
}

// IsZero reports whether r is the zero ImageRef, which names no image.
func (r ImageRef) IsZero() bool { return r.digest == "" }
