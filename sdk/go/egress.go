// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"
)

// EgressProxyUser is the user name the SDK puts in the egress proxy URL;
// the password is the plugin's current openfief-egress token.
const EgressProxyUser = "plugin"

// ErrNoEgressProxy means no egress proxy is configured: the plugin was
// granted no egress host, so it may reach no institution.
var ErrNoEgressProxy = errors.New("egress: no proxy configured (HTTPS_PROXY unset)")

// ErrPlainHTTP is returned for a request to a plain http URL: institutions
// are reached only over HTTPS, through the proxy's CONNECT tunnel.
var ErrPlainHTTP = errors.New("egress: only https URLs may be fetched")

// NewEgressClient returns the HTTP client a plugin reaches its
// institutions with: an EgressTransport for the proxy in HTTPS_PROXY
// and the token file in OPENFIEF_EGRESS_TOKEN_FILE. It fails with
// ErrNoEgressProxy when HTTPS_PROXY is unset.
func NewEgressClient() (*http.Client, error) {
	raw := os.Getenv(EnvHTTPSProxy)
	if raw == "" {
		return nil, ErrNoEgressProxy
	}
	proxy, err := parseProxyURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvHTTPSProxy, err)
	}
	path := os.Getenv(EnvEgressTokenFile)
	if path == "" {
		return nil, fmt.Errorf("egress: %s unset", EnvEgressTokenFile)
	}
	tokens, err := NewTokenFile(path)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: NewEgressTransport(proxy, tokens), Timeout: 5 * time.Minute}, nil
}

// parseProxyURL accepts an http or https proxy URL with a host and nothing
// the SDK would override or drop: no user info, path, query or fragment.
func parseProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return nil, errors.New("no host")
	case u.User != nil:
		return nil, errors.New("must not carry user info")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("must not have a path, query or fragment")
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil
}

// EgressTransport is an http.RoundTripper that sends every request through
// the egress proxy. For each request it rebuilds the proxy URL with
// user "plugin" and the egress token the file holds now as password, which
// Go's transport sends as Basic Proxy-Authorization on the CONNECT, so a
// rotated token opens a new tunnel. It refuses plain http URLs and, without
// a proxy, refuses to send anything.
type EgressTransport struct {
	proxy  *url.URL
	tokens TokenFile
	base   *http.Transport
}

// NewEgressTransport returns an EgressTransport for proxy with the egress
// token in tokens. A nil proxy makes every request fail with
// ErrNoEgressProxy.
func NewEgressTransport(proxy *url.URL, tokens TokenFile) *EgressTransport {
	t := &EgressTransport{proxy: proxy, tokens: tokens}
	t.base = http.DefaultTransport.(*http.Transport).Clone()
	t.base.Proxy = t.proxyURL
	return t
}

// proxyURL is the per-request proxy of the base transport.
func (t *EgressTransport) proxyURL(*http.Request) (*url.URL, error) {
	if t.proxy == nil {
		return nil, ErrNoEgressProxy
	}
	token, err := t.tokens.Read()
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	u := *t.proxy
	u.User = url.UserPassword(EgressProxyUser, token)
	return &u, nil
}

// RoundTrip sends req through the proxy, refusing a URL that is not https
// and refusing everything when no proxy is configured.
func (t *EgressTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		closeBody(req)
		return nil, ErrPlainHTTP
	}
	if t.proxy == nil {
		closeBody(req)
		return nil, ErrNoEgressProxy
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the proxy tunnels the transport keeps open.
func (t *EgressTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }
