// Package checkprobe is the program of the check probe image (OF-29):
// served, it answers every TCP connection with a short HTTP reply; run with
// a request (probewire.Request), it tries each cell once from inside its
// plugin pod and prints what it observed (probewire.Response). `openfief
// check --isolation` installs it as two Plugins and execs into their pods.
package checkprobe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/arkadiuss/openfief/internal/check/probewire"
)

// request is a parsed, valid probewire.Request.
type request struct {
	timeout time.Duration
	cells   []probewire.Cell
}

// parseRequest reads REQUEST_JSON strictly: one JSON object, no unknown
// fields, within probewire's bounds, every cell with exactly the fields its
// kind uses, each well formed. The exec argument is outside input to the
// probe, so nothing it carries reaches a socket or a request line unchecked.
func parseRequest(raw string) (request, error) {
	if len(raw) > probewire.MaxRequestBytes {
		return request{}, fmt.Errorf("the request is %d bytes, more than %d", len(raw), probewire.MaxRequestBytes)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var req probewire.Request
	if err := dec.Decode(&req); err != nil {
		return request{}, fmt.Errorf("the request is not a JSON request: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return request{}, errors.New("the request has data after its JSON object")
	}
	ms := req.TimeoutMillis
	switch {
	case ms == 0:
		ms = probewire.DefaultTimeoutMillis
	case ms < 0 || ms > probewire.MaxTimeoutMillis:
		return request{}, fmt.Errorf("timeoutMillis %d: want 1 to %d (0 means %d)", ms, probewire.MaxTimeoutMillis, probewire.DefaultTimeoutMillis)
	}
	switch n := len(req.Cells); {
	case n == 0:
		return request{}, errors.New("the request has no cells")
	case n > probewire.MaxCells:
		return request{}, fmt.Errorf("the request has %d cells, more than %d", n, probewire.MaxCells)
	}
	names := map[string]bool{}
	for i, c := range req.Cells {
		if err := checkCell(c); err != nil {
			return request{}, fmt.Errorf("cells[%d]: %w", i, err)
		}
		if names[c.Name] {
			return request{}, fmt.Errorf("cells[%d]: the name %q is used twice", i, c.Name)
		}
		names[c.Name] = true
	}
	return request{timeout: time.Duration(ms) * time.Millisecond, cells: req.Cells}, nil
}

// checkCell checks one cell's name and that it has exactly the fields of
// its kind, each well formed.
func checkCell(c probewire.Cell) error {
	if c.Name == "" || len(c.Name) > probewire.MaxNameBytes || !printableASCII(c.Name) {
		return fmt.Errorf("name: want 1 to %d printable ASCII characters", probewire.MaxNameBytes)
	}
	switch c.Kind {
	case probewire.KindTCP:
		if c.Host != "" || c.Query != "" {
			return fmt.Errorf("%q: a %s cell has a target only", c.Name, c.Kind)
		}
		return checkHostPort("target", c.Target)
	case probewire.KindDNSUDP, probewire.KindDNSTCP:
		if c.Host != "" {
			return fmt.Errorf("%q: a %s cell has a target and a query only", c.Name, c.Kind)
		}
		if c.Query != "" {
			if _, ok := dns.IsDomainName(c.Query); !ok || len(dns.Fqdn(c.Query)) > 254 || !hostChars(c.Query) {
				return fmt.Errorf("%q: query: not a DNS name", c.Name)
			}
		}
		return checkHostPort("target", c.Target)
	case probewire.KindProxyNoToken, probewire.KindProxyToken:
		if c.Target != "" || c.Query != "" {
			return fmt.Errorf("%q: a %s cell has a host only (the proxy is HTTPS_PROXY)", c.Name, c.Kind)
		}
		return checkHostPort("host", c.Host)
	}
	return fmt.Errorf("%q: kind %q: want %s, %s, %s, %s or %s", c.Name, c.Kind,
		probewire.KindTCP, probewire.KindDNSUDP, probewire.KindDNSTCP, probewire.KindProxyNoToken, probewire.KindProxyToken)
}

// checkHostPort checks a host:port: a host of at most 253 characters of a
// name or an IP literal (brackets for IPv6), and a port from 1 to 65535.
func checkHostPort(field, hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("%s: want host:port", field)
	}
	if host == "" || len(host) > 253 || !hostChars(host) {
		return fmt.Errorf("%s: not a host name or IP address", field)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return fmt.Errorf("%s: the port is not 1 to 65535", field)
	}
	return nil
}

// hostChars reports whether s has only the characters of a DNS name or an
// IP literal, so it can go into a request line as it is.
func hostChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == ':', c == '_':
		default:
			return false
		}
	}
	return true
}

// printableASCII reports whether s has only the bytes from ' ' to '~'.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
