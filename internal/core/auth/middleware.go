package auth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
)

// instanceKey is the context key of the verified instance.
type instanceKey struct{}

// Instance returns the plugin instance RequirePlugin verified for the
// request whose context is ctx.
func Instance(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(instanceKey{}).(string)
	return s, ok && s != ""
}

// RequirePlugin lets through only requests whose "Authorization: Bearer"
// token v verifies, with the instance in the request's context (Instance);
// others get 401 (refused) or 503 (could not tell), before next runs. It
// logs the refusal's reason, never the token.
func RequirePlugin(v *Verifier, log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openfief-core"`)
			http.Error(w, "a plugin's openfief-core bearer token is required", http.StatusUnauthorized)
			return
		}
		instance, err := v.Verify(r.Context(), token)
		switch {
		case errors.Is(err, ErrRefused):
			log.Info("plugin request refused", "path", r.URL.Path, "reason", err.Error())
			w.Header().Set("WWW-Authenticate", `Bearer realm="openfief-core"`)
			http.Error(w, "token refused", http.StatusUnauthorized)
			return
		case err != nil:
			log.Warn("plugin token not verified", "path", r.URL.Path, "error", err.Error())
			http.Error(w, "the token could not be verified now; retry", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), instanceKey{}, instance)))
	})
}

// bearerToken returns the credentials of an Authorization header value in
// the Bearer scheme.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
