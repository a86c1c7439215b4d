package egress

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// connectTarget reads a CONNECT request target, which must be in authority
// form host:port, and returns its canonical form (plugins.CanonicalEgressHost,
// the form the allow-lists hold, D-32) split into host and port. A target
// that is not host:port is a bad request; an IP literal or a host the domain
// refuses is forbidden, because plugins name hosts and the proxy resolves
// them.
func connectTarget(requestURI string) (canonical, host string, port uint16, d *denial) {
	if requestURI == "" || len(requestURI) > 512 || !utf8.ValidString(requestURI) ||
		strings.ContainsAny(requestURI, "/?#@ \t\\") {
		return "", "", 0, deny(http.StatusBadRequest, ReasonBadTarget)
	}
	h, p, err := net.SplitHostPort(requestURI)
	if err != nil || h == "" || p == "" {
		return "", "", 0, deny(http.StatusBadRequest, ReasonBadTarget)
	}
	if _, err := netip.ParseAddr(h); err == nil || strings.ContainsAny(h, "[]:%") {
		return "", "", 0, deny(http.StatusForbidden, ReasonIPLiteral)
	}
	canonical, err = plugins.CanonicalEgressHost(h + ":" + p)
	if err != nil {
		return "", "", 0, deny(http.StatusForbidden, ReasonInvalidTarget)
	}
	// Allow-list entries are fixed points of the canonicalisation; a
	// result that is not one can match none, and is refused as such.
	if again, err := plugins.CanonicalEgressHost(canonical); err != nil || again != canonical {
		return "", "", 0, deny(http.StatusForbidden, ReasonInvalidTarget)
	}
	i := strings.LastIndexByte(canonical, ':')
	n, err := strconv.ParseUint(canonical[i+1:], 10, 16)
	if err != nil || n == 0 {
		return "", "", 0, deny(http.StatusForbidden, ReasonInvalidTarget)
	}
	return canonical, canonical[:i], uint16(n), nil
}
