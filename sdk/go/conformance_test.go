// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// TestConformanceTokens checks every shared token vector against the Go
// verifier: the TypeScript SDK's tests read the same file and must give the
// same verdicts and reasons.
func TestConformanceTokens(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(conformanceDir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f tokenVectors
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no token vectors")
	}
	dirs := make(map[string]string)
	for _, name := range sortedKeys(f.KeySets) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, JWKSFileName), f.KeySets[name].JWKS)
		writeFile(t, filepath.Join(dir, IssuerFileName), f.KeySets[name].Issuer)
		dirs[name] = dir
	}
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			dir, ok := dirs[v.KeySet]
			if !ok {
				t.Fatalf("no key set %q", v.KeySet)
			}
			ver, err := NewJWKSVerifier(dir, f.Instance, f.Subject)
			if err != nil {
				t.Fatal(err)
			}
			ver.now = func() time.Time { return time.Unix(f.Now, 0) }
			err = ver.Verify(v.Token)
			got, reason := "accept", ""
			if err != nil {
				got, reason = "refuse", refusalReason(err)
			}
			if got != v.Expect || reason != v.Reason {
				t.Fatalf("Verify = %s %s (%v), want %s %s", got, reason, err, v.Expect, v.Reason)
			}
		})
	}
}

// refusalReason names why Verify refused, in the words the vectors (and the
// TypeScript SDK's TokenRefusedError.reason) use.
func refusalReason(err error) string {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{jwt.ErrExpired, "expiry"},
		{jwt.ErrNotValidYet, "not_yet_valid"},
		{jwt.ErrIssuedInTheFuture, "issued_in_future"},
		{jwt.ErrInvalidIssuer, "issuer"},
		{jwt.ErrInvalidSubject, "subject"},
		{jwt.ErrInvalidAudience, "audience"},
	} {
		if errors.Is(err, c.err) {
			return c.reason
		}
	}
	msg := strings.TrimPrefix(err.Error(), ErrTokenRefused.Error()+": ")
	switch msg {
	case "no token", "token too long", "not a JWS with an allowed algorithm", "not exactly one signature":
		return "malformed"
	case "no key ID", "unknown key ID":
		return "key_id"
	case "algorithm does not fit the key":
		return "key_alg"
	case "bad signature":
		return "signature"
	case "no expiry":
		return "expiry"
	}
	return "keys"
}

// TestConformanceEnvironment checks the shared vectors of the operator's
// environment (environment.json), which the TypeScript SDK's tests read too.
func TestConformanceEnvironment(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(conformanceDir, "environment.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		CoreAddress []struct {
			In    string `json:"in"`
			Valid bool   `json:"valid"`
		} `json:"core_address"`
		ListenPort []struct {
			In   string `json:"in"`
			Port *int   `json:"port"`
		} `json:"listen_port"`
		ProxyURL []struct {
			In  string  `json:"in"`
			Out *string `json:"out"`
		} `json:"proxy_url"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.CoreAddress) == 0 || len(f.ListenPort) == 0 || len(f.ProxyURL) == 0 {
		t.Fatal("a list of environment.json is empty")
	}
	for _, v := range f.CoreAddress {
		if _, err := parseCoreAddress(v.In); (err == nil) != v.Valid {
			t.Errorf("core address %q: error %v, want valid %v", v.In, err, v.Valid)
		}
	}
	for _, v := range f.ListenPort {
		t.Setenv(EnvListenPort, v.In)
		addr, err := ListenAddress()
		switch {
		case v.Port == nil && err == nil:
			t.Errorf("listen port %q = %s, want an error", v.In, addr)
		case v.Port != nil && (err != nil || addr != ":"+strconv.Itoa(*v.Port)):
			t.Errorf("listen port %q = %s, %v; want %d", v.In, addr, err, *v.Port)
		}
	}
	for _, v := range f.ProxyURL {
		u, err := parseProxyURL(v.In)
		switch {
		case v.Out == nil && err == nil:
			t.Errorf("proxy URL %q = %s, want an error", v.In, u)
		case v.Out != nil && (err != nil || u.String() != *v.Out):
			t.Errorf("proxy URL %q = %v, %v; want %s", v.In, u, err, *v.Out)
		}
	}
}
