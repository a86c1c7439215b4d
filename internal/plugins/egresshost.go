package plugins

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DefaultEgressPort is the port of an egress host written without one.
const DefaultEgressPort = 443

// maxEgressHostLen bounds the input CanonicalEgressHost reads.
const maxEgressHostLen = 300

// CanonicalEgressHost turns an egress host as written (host or host:port) into
// its canonical form "host:port": lower-case ASCII, labels in other scripts in
// their xn-- form, port 443 when none is written. It refuses IP literals,
// wildcards, single-label names, a trailing dot and bad ports, because the
// proxy, not the plugin, resolves names (D-32). It also refuses names that
// only a cluster's or a home network's resolver answers (see
// clusterOnlySuffixes): an egress host names an institution on the public
// internet, never something a Service or a local device can claim. The proxy
// applies the same function to CONNECT targets, so both sides compare one
// form.
func CanonicalEgressHost(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidEgressHost)
	}
	if len(s) > maxEgressHostLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidEgressHost, maxEgressHostLen)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: not valid UTF-8", ErrInvalidEgressHost)
	}
	if strings.HasPrefix(s, "[") {
		return "", fmt.Errorf("%w: %q is an IP literal; name a host", ErrInvalidEgressHost, s)
	}
	host, port := s, DefaultEgressPort
	if h, p, ok := strings.Cut(s, ":"); ok {
		n, err := parsePort(p)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v", ErrInvalidEgressHost, s, err)
		}
		host, port = h, n
	}
	canon, err := canonicalHostname(host)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidEgressHost, s, err)
	}
	return canon + ":" + strconv.Itoa(port), nil
}

// parsePort reads a decimal port 1 to 65535 with no sign or leading zero.
func parsePort(p string) (int, error) {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return 0, fmt.Errorf("port %q is not 1 to 65535", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, fmt.Errorf("port %q is not 1 to 65535", p)
		}
	}
	n, _ := strconv.Atoi(p)
	if n > 65535 {
		return 0, fmt.Errorf("port %q is not 1 to 65535", p)
	}
	return n, nil
}

// canonicalHostname maps a hostname to lower-case ASCII with IDNA (UTS #46,
// non-transitional, as browsers resolve) and checks what the proxy needs.
func canonicalHostname(host string) (string, error) {
	switch {
	case host == "":
		return "", fmt.Errorf("empty host")
	case strings.HasSuffix(host, "."):
		return "", fmt.Errorf("trailing dot")
	case strings.Contains(host, "*"):
		return "", fmt.Errorf("wildcards are not allowed")
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "", fmt.Errorf("IP literals are not allowed; name a host")
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return "", fmt.Errorf("not a valid hostname: %v", err)
	}
	labels := strings.Split(ascii, ".")
	if len(labels) < 2 {
		return "", fmt.Errorf("single-label names are not allowed; use a fully qualified name")
	}
	for _, l := range labels {
		if !isDNSLabel(l, 63) {
			return "", fmt.Errorf("label %q is not a DNS label", l)
		}
	}
	if allDigits(labels[len(labels)-1]) {
		// Numeric top-level labels are how IPv4 shorthand (127.1, 0x7f.1 is
		// refused above as non-LDH) would slip past: no real TLD is numeric.
		return "", fmt.Errorf("numeric top-level label; IP addresses are not allowed")
	}
	if len(ascii) > 253 {
		return "", fmt.Errorf("longer than 253 bytes")
	}
	if suffix, ok := clusterOnlyName(labels); ok {
		return "", fmt.Errorf("names under %q are answered only inside a cluster or a local network", suffix)
	}
	// The canonical form must canonicalise to itself: the proxy and the
	// allow-list compare canonical forms byte for byte.
	if again, err := idna.Lookup.ToASCII(ascii); err != nil || again != ascii {
		return "", fmt.Errorf("does not have a stable canonical form")
	}
	return ascii, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// clusterOnlySuffixes are the top-level labels no public name has and some
// private resolver answers: "local" (Kubernetes' default cluster.local and
// multicast DNS, RFC 6762), "svc" (the short form ns.svc that a pod's search
// list completes), "internal" (reserved for private networks; a cloud's
// metadata server lives there), "localhost" (RFC 6761), "localdomain", and
// "arpa" (home.arpa, RFC 8375, and the reverse-lookup zones). A cluster whose
// domain is not cluster.local has its own suffix, which the proxy refuses
// with InClusterDomain.
var clusterOnlySuffixes = []string{"arpa", "internal", "local", "localdomain", "localhost", "svc"}

// clusterOnlyName reports the refused top-level label of a name given as
// its labels, if it has one.
func clusterOnlyName(labels []string) (string, bool) {
	tld := labels[len(labels)-1]
	for _, s := range clusterOnlySuffixes {
		if tld == s {
			return s, true
		}
	}
	return "", false
}

// InClusterDomain reports whether host (canonical, without port) is the
// cluster domain clusterDomain or a name under it, such as
// "api.ns.svc.cluster.example" in a cluster whose domain is
// "cluster.example". The egress proxy refuses such targets: only the
// cluster's DNS answers them, and a Service's owner chooses the answer.
// An empty clusterDomain matches nothing.
func InClusterDomain(host, clusterDomain string) bool {
	d := strings.TrimSuffix(strings.ToLower(clusterDomain), ".")
	if d == "" {
		return false
	}
	return host == d || strings.HasSuffix(host, "."+d)
}
