package egress

import (
	"encoding/base64"
	"errors"
	"strings"
)

// ProxyUser is the user name a plugin sends in Proxy-Authorization; the
// password is its openfief-egress token (D-63).
const ProxyUser = "plugin"

// maxAuthHeaderLen bounds the Proxy-Authorization value the proxy reads. A
// Kubernetes ServiceAccount token is a JWT of one or two kilobytes.
const maxAuthHeaderLen = 16 << 10

// Reasons parseProxyAuthorization refuses credentials with.
var (
	errNoCredentials  = errors.New("no Proxy-Authorization header")
	errBadCredentials = errors.New("malformed Proxy-Authorization header")
)

// parseProxyAuthorization reads the egress token from the request's
// Proxy-Authorization header values: exactly one header, scheme Basic, user
// ProxyUser and a non-empty password of printable ASCII without spaces (D-63).
// Errors never contain any part of the header.
func parseProxyAuthorization(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", errNoCredentials
	case 1:
	default:
		return "", errBadCredentials
	}
	v := values[0]
	if v == "" {
		return "", errNoCredentials
	}
	if len(v) > maxAuthHeaderLen {
		return "", errBadCredentials
	}
	scheme, encoded, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", errBadCredentials
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimLeft(encoded, " "))
	if err != nil {
		return "", errBadCredentials
	}
	user, token, ok := strings.Cut(string(raw), ":")
	if !ok || user != ProxyUser || token == "" {
		return "", errBadCredentials
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			return "", errBadCredentials
		}
	}
	return token, nil
}
