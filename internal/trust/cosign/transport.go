package cosign

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// guardedTransport sits under go-containerregistry. It refuses plain HTTP to
// any host but a loopback registry or one configured as insecure, including
// on redirects and token requests (go-containerregistry would otherwise fall
// back to HTTP for RFC 1918 addresses and *.localhost names), and it caps
// every response body so no registry answer can exhaust memory.
//
// A redirect is judged by where the chain started: a
// registry that is not itself loopback may only send the reader on over
// HTTPS to another host, never to a loopback, private, link-local or
// otherwise non-public address, whether written as an IP or a name that
// resolves to one (the dial checks it, see redirectSafeDialer). Otherwise a
// remote registry could make the operator read a service on its own node.
type guardedTransport struct {
	base     http.RoundTripper
	insecure map[string]bool // host[:port] allowed over plain HTTP
	maxBody  int64
}

// RoundTrip implements http.RoundTripper.
func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := refuseRedirect(req); err != nil {
		return nil, err
	}
	if origin := redirectOrigin(req); origin != "" && !t.plainHTTPAllowed(origin) {
		if req.URL.Scheme != "https" {
			return nil, fmt.Errorf("refusing the redirect from %s to plain %s", origin, req.URL.Scheme)
		}
		if !publicHost(req.URL.Hostname()) {
			return nil, fmt.Errorf("refusing the redirect from %s to %s, which is not a public address", origin, req.URL.Hostname())
		}
		req = req.WithContext(context.WithValue(req.Context(), publicOnlyKey{}, true))
	}
	if req.URL.Scheme != "https" && !t.plainHTTPAllowed(req.URL.Host) {
		return nil, fmt.Errorf("refusing plain %s to %s: only loopback or configured insecure registries may use it", req.URL.Scheme, req.URL.Host)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.maxBody, limit: t.maxBody}
	return resp, nil
}

// redirectOrigin returns the host[:port] where req's redirect chain started,
// or "" when req is not a redirect.
func redirectOrigin(req *http.Request) string {
	if req.Response == nil {
		return ""
	}
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	return first.URL.Host
}

// publicOnlyKey marks a request's context: its connections may only go to
// public addresses.
type publicOnlyKey struct{}

// publicHost reports whether host (no port) may be the target of a redirect
// by its spelling: not a loopback or *.localhost name, and not an IP
// literal outside public unicast. Names are checked again when dialled.
func publicHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return publicAddr(a)
	}
	return host != ""
}

// publicAddr reports whether a is a public unicast address.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!cgnat.Contains(a) && a.Zone() == ""
}

// cgnat is carrier-grade NAT space (RFC 6598), private in all but name.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// redirectSafeDialer wraps dial so that connections made for a request
// marked publicOnlyKey reach only public addresses, whatever the name
// resolved to.
func redirectSafeDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil || ctx.Value(publicOnlyKey{}) == nil {
			return conn, err
		}
		ap, perr := netip.ParseAddrPort(conn.RemoteAddr().String())
		if perr != nil || !publicAddr(ap.Addr()) {
			_ = conn.Close() // refused before anything was sent on it
			return nil, fmt.Errorf("refusing the redirect to %s: it resolved to %s, not a public address", addr, conn.RemoteAddr())
		}
		return conn, nil
	}
}

func (t *guardedTransport) plainHTTPAllowed(hostport string) bool {
	if t.insecure[hostport] {
		return true
	}
	return isLoopback(hostport)
}

// isLoopback reports whether host[:port] names 127.0.0.1, localhost or
// [::1]: the registries the tests run in process. Other names never get
// plain HTTP unless configured (WithInsecureRegistries).
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return host == "127.0.0.1" || host == "localhost" || host == "::1"
}

// bodyTooLargeError is returned by a capped response body once the registry
// sent more than the cap.
type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("registry response larger than %d bytes", e.limit)
}

type cappedBody struct {
	rc    io.ReadCloser
	left  int64
	limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &bodyTooLargeError{limit: b.limit}
	}
	// Read one byte past the cap so an answer of exactly the cap passes.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, &bodyTooLargeError{limit: b.limit}
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
