package plugins

import "fmt"

// MaxNameLength caps a plugin name so that "plugin-<name>" still fits
// Kubernetes' 63-character limit for Service names.
const MaxNameLength = 56

// ValidateName checks a plugin name: a DNS label that starts with a letter,
// at most MaxNameLength characters.
func ValidateName(name string) error {
	switch {
	case name == "":
		return ErrRequired
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: %d characters, at most %d", ErrInvalidName, len(name), MaxNameLength)
	case !isDNSLabel(name, MaxNameLength) || !isLowerLetter(name[0]):
		return fmt.Errorf("%w: %q is not a lower-case DNS label starting with a letter", ErrInvalidName, name)
	}
	return nil
}

// isDNSLabel matches RFC 1123 labels: lower-case letters, digits and '-',
// starting and ending with a letter or digit, at most maxLen bytes.
func isDNSLabel(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isLowerLetter(c) || c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// isDNSSubdomain matches Kubernetes' DNS-1123 subdomain rule used for Secret
// and ConfigMap names: dot-separated labels, at most 253 bytes.
func isDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isDNSLabel(s[start:i], 63) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

func isLowerLetter(c byte) bool { return c >= 'a' && c <= 'z' }
