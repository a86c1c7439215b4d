// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// CoreHTTPClient returns an HTTP client for calling the core at CoreURL
// with the plugin's openfief-core token: the token file named by
// OPENFIEF_TOKEN_FILE, or DefaultTokenPath.
func CoreHTTPClient() (*http.Client, error) {
	core, err := CoreURL()
	if err != nil {
		return nil, err
	}
	tokens, err := CoreTokenFile()
	if err != nil {
		return nil, err
	}
	return NewCoreHTTPClient(core, tokens), nil
}

// NewCoreHTTPClient returns an HTTP client that sends the token tokens holds
// now as "Authorization: Bearer" on every request. It reaches the
// core directly, never through a proxy, and refuses any request whose
// scheme and host are not core's, so the core token goes nowhere else.
func NewCoreHTTPClient(core *url.URL, tokens TokenFile) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil // NO_PROXY names the core too, but never depend on it.
	return &http.Client{
		Transport: &coreTransport{scheme: core.Scheme, host: core.Host, tokens: tokens, base: base},
		Timeout:   5 * time.Minute,
	}
}

// coreTransport adds the current core token to requests for the core.
type coreTransport struct {
	scheme, host string
	tokens       TokenFile
	base         http.RoundTripper
}

// errNotCore is returned for a request that would carry the core token to
// another host.
var errNotCore = errors.New("core client: request is not for the core")

// RoundTrip sends req to the core with the current core token.
func (t *coreTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.scheme || req.URL.Host != t.host {
		closeBody(req)
		return nil, errNotCore
	}
	token, err := t.tokens.Read()
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("core client: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return t.base.RoundTrip(r)
}

// closeBody closes a request body a RoundTripper will not send, as
// http.RoundTripper requires.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
