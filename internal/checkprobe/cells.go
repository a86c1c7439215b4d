package checkprobe

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Env is what the probe reads from its environment, which the operator
// sets for every plugin (internal/plugins/compile.go).
type Env struct {
	// HTTPSProxy is plugins.EnvHTTPSProxy: the egress proxy's
	// http://host:port, empty for a plugin granted no egress.
	HTTPSProxy string
	// EgressTokenFile is plugins.EnvEgressTokenFile: the file of the
	// plugin's openfief-egress token (D-63).
	EgressTokenFile string
}

// EnvFrom reads Env with getenv (os.Getenv).
func EnvFrom(getenv func(string) string) Env {
	return Env{HTTPSProxy: getenv(plugins.EnvHTTPSProxy), EgressTokenFile: getenv(plugins.EnvEgressTokenFile)}
}

// Bounds of what the probe reads.
const (
	// maxTokenBytes bounds the token file read, as the proxy bounds the
	// Proxy-Authorization header.
	maxTokenBytes = 16 << 10
	// maxProxyHeaderBytes bounds the proxy's status line and headers.
	maxProxyHeaderBytes = 16 << 10
	// proxyUser is the user of the proxy's Basic credentials (egress.ProxyUser).
	proxyUser = "plugin"
)

// run tries every cell of r concurrently, each bounded by r's timeout,
// and returns their results in request order.
func run(ctx context.Context, r request, env Env) probewire.Response {
	out := probewire.Response{Results: make([]probewire.Result, len(r.cells))}
	var wg sync.WaitGroup
	for i, c := range r.cells {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, r.timeout)
			defer cancel()
			observed, detail := try(cctx, c, env)
			out.Results[i] = probewire.Result{Name: c.Name, Observed: observed, Detail: cleanDetail(detail)}
		})
	}
	wg.Wait()
	return out
}

// try runs one valid cell.
func try(ctx context.Context, c probewire.Cell, env Env) (observed, detail string) {
	switch c.Kind {
	case probewire.KindTCP:
		return tryTCP(ctx, c.Target)
	case probewire.KindDNSUDP:
		return tryDNS(ctx, "udp", c.Target, c.Query)
	case probewire.KindDNSTCP:
		return tryDNS(ctx, "tcp", c.Target, c.Query)
	case probewire.KindProxyNoToken:
		return tryProxy(ctx, env, c.Host, false)
	case probewire.KindProxyToken:
		return tryProxy(ctx, env, c.Host, true)
	}
	return probewire.ObservedError, "unknown kind"
}

// tryTCP opens one TCP connection and closes it.
func tryTCP(ctx context.Context, target string) (string, string) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return classify(ctx, err)
	}
	detail := "connected to " + conn.RemoteAddr().String()
	_ = conn.Close() // nothing was sent
	return probewire.ObservedOpen, detail
}

// tryDNS sends one A query with recursion desired over network and
// reports any reply as answered, with its rcode.
func tryDNS(ctx context.Context, network, target, query string) (string, string) {
	if query == "" {
		query = probewire.DefaultDNSQuery
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(query), dns.TypeA)
	m.RecursionDesired = true
	c := &dns.Client{Net: network}
	if dl, ok := ctx.Deadline(); ok {
		c.Timeout = time.Until(dl)
	}
	reply, _, err := c.ExchangeContext(ctx, m, target)
	if err != nil {
		return classify(ctx, err)
	}
	return probewire.ObservedAnswered, fmt.Sprintf("rcode %s, %d answers", dns.RcodeToString[reply.Rcode], len(reply.Answer))
}

// tryProxy sends one CONNECT for host to the proxy of env, with the
// plugin's token when withToken, reads the status line and headers, and
// closes: it never sends a byte into a tunnel that opened.
func tryProxy(ctx context.Context, env Env, host string, withToken bool) (string, string) {
	if env.HTTPSProxy == "" {
		return probewire.ObservedError, "no HTTPS_PROXY: the plugin was granted no egress"
	}
	proxy, err := proxyAddress(env.HTTPSProxy)
	if err != nil {
		return probewire.ObservedError, err.Error()
	}
	var token, auth string
	if withToken {
		if token, err = readToken(env.EgressTokenFile); err != nil {
			return probewire.ObservedError, err.Error()
		}
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+token))
	}
	observed, detail := connectProxy(ctx, proxy, host, auth)
	if token != "" && (strings.Contains(detail, token) || strings.Contains(detail, auth)) {
		detail = "(the proxy's answer held the token; not shown)"
	}
	return observed, detail
}

// connectProxy sends the CONNECT to the proxy at proxy (host:port) with
// the Proxy-Authorization value auth, if any, and reads its answer.
func connectProxy(ctx context.Context, proxy, host, auth string) (string, string) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", proxy)
	if err != nil {
		return classify(ctx, err)
	}
	defer func() { _ = conn.Close() }() // only read from
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl) // a failure shows as the write's or read's
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", host, host)
	if auth != "" {
		b.WriteString("Proxy-Authorization: " + auth + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return classify(ctx, err)
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: host}, Host: host}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(conn, maxProxyHeaderBytes)), req)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return probewire.ObservedError, "the proxy closed the connection before a whole status line and headers (at most 16 KiB)"
		}
		return classify(ctx, err)
	}
	return probewire.StatusObserved(resp.StatusCode), "proxy answered " + resp.Status
}

// proxyAddress reads HTTPS_PROXY as the operator sets it: http://host:port.
func proxyAddress(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return "", errors.New("HTTPS_PROXY is not http://host:port")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(host, port), nil
}

// readToken reads the egress token file, at most maxTokenBytes, without
// its surrounding white space. Its errors never hold the token.
func readToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("no OPENFIEF_EGRESS_TOKEN_FILE: the plugin has no egress token")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open the egress token file: %w", errors.Unwrap(err))
	}
	defer func() { _ = f.Close() }() // read only
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", errors.New("read the egress token file failed")
	}
	if len(raw) > maxTokenBytes {
		return "", fmt.Errorf("the egress token file is larger than %d bytes", maxTokenBytes)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", errors.New("the egress token file is empty")
	}
	return token, nil
}

// classify maps a connection's error to refused, timeout or error.
func classify(ctx context.Context, err error) (string, string) {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return probewire.ObservedRefused, errText(err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout(), ctx.Err() != nil:
		return probewire.ObservedTimeout, errText(err)
	}
	return probewire.ObservedError, errText(err)
}

// errText is an error's text for a Detail.
func errText(err error) string { return err.Error() }
