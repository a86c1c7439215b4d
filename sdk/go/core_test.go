// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCoreHTTPClientSendsTheCurrentToken(t *testing.T) {
	var got []string
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer core.Close()
	// A proxy that must never be used: the core is reached directly.
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied.Add(1) }))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")

	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, "core-token-1")
	t.Setenv(EnvTokenFile, path)
	t.Setenv(EnvCoreAddress, strings.TrimPrefix(core.URL, "http://"))
	client, err := CoreHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	get := func() {
		t.Helper()
		resp, err := client.Get(core.URL + "/v1/anything")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	writeFile(t, path, "core-token-2")
	get()
	want := []string{"Bearer core-token-1", "Bearer core-token-2"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("core saw %q, want %q", got, want)
	}
	if proxied.Load() != 0 {
		t.Fatal("the core client used a proxy")
	}
	// Go never proxies loopback addresses, so the check above cannot see a
	// proxy configured for the core's ClusterIP: check the transport too.
	if base := client.Transport.(*coreTransport).base.(*http.Transport); base.Proxy != nil {
		t.Fatal("the core client's transport has a proxy function")
	}
}

func TestCoreHTTPClientRefusesOtherHosts(t *testing.T) {
	var seen atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1) }))
	defer other.Close()
	// The core redirects to another host: the token must not follow.
	core := httptest.NewServer(http.RedirectHandler(other.URL+"/steal", http.StatusFound))
	defer core.Close()
	coreURL, err := url.Parse(core.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := NewCoreHTTPClient(coreURL, mustTokenFile(t, filepath.Join(t.TempDir(), "token"), "secret-core-token"))
	for _, target := range []string{other.URL + "/direct", core.URL + "/redirected", strings.Replace(core.URL, "http://", "https://", 1)} {
		resp, err := client.Get(target)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("GET %s succeeded", target)
		}
		if !errors.Is(err, errNotCore) {
			t.Fatalf("GET %s: %v, want errNotCore", target, err)
		}
		if strings.Contains(err.Error(), "secret-core-token") {
			t.Fatal("error contains the token")
		}
	}
	if seen.Load() != 0 {
		t.Fatal("a request reached a host other than the core")
	}
}

func TestCoreHTTPClientMissingToken(t *testing.T) {
	var seen atomic.Int64
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1) }))
	defer core.Close()
	coreURL, _ := url.Parse(core.URL)
	tf, err := NewTokenFile(filepath.Join(t.TempDir(), "absent"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := NewCoreHTTPClient(coreURL, tf).Get(core.URL); err == nil {
		resp.Body.Close()
		t.Fatal("request without a token succeeded")
	}
	if seen.Load() != 0 {
		t.Fatal("a request without a token reached the core")
	}
}
