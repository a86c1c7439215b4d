// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
