package cosign

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// guardedTransport sits under go-containerregistry. It refuses plain HTTP to
// any host but a loopback registry or one configured as insecure, including
// on redirects and token requests (go-containerregistry would otherwise fall
// back to HTTP for RFC 1918 addresses and *.localhost names), and it caps
// every response body so no registry answer can exhaust memory.
type guardedTransport struct {
	base     http.RoundTripper
	insecure map[string]bool // host[:port] allowed over plain HTTP
	maxBody  int64
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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
