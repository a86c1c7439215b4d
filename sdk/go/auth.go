// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"net/http"
	"strings"
)

// RequireCore lets through only requests whose "Authorization: Bearer"
// token verifier accepts, the core's token for this instance; every
// other request gets 401 before next sees it. The response never says why,
// and nothing is logged. A nil verifier refuses every request.
func RequireCore(verifier CoreVerifier, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header)
		if !ok || verifier == nil || verifier.Verify(token) != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openfief-plugin"`)
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of the request's single Authorization
// header when it uses the Bearer scheme.
func bearerToken(h http.Header) (string, bool) {
	values := h.Values("Authorization")
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
