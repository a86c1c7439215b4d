package auth

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// RequireOwner lets through only requests that carry exactly one owner token
// in ownerapi.HeaderOwnerToken which v accepts (OF-18), and removes the
// header before next runs, so nothing after it can pass the token on. Other
// requests get a JSON ownerapi.ErrorResponse naming the reason: 401 with no
// token or a token the API server refuses for the owner's audience, 403 with
// someone else's token, 503 when the review could not be made; next does not
// run. It logs the reason and the path, never the token.
func RequireOwner(v *OwnerVerifier, log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values(ownerapi.HeaderOwnerToken)
		r.Header.Del(ownerapi.HeaderOwnerToken)
		token := ""
		if len(values) == 1 {
			token = strings.TrimSpace(values[0])
		}
		if token == "" {
			log.Info("owner request refused", "path", r.URL.Path, "reason", ownerapi.ReasonTokenRequired, "headers", len(values))
			refuseOwner(w, http.StatusUnauthorized, ownerapi.ReasonTokenRequired,
				"the owner API needs exactly one owner token in "+ownerapi.HeaderOwnerToken+
					" (a TokenRequest token of serviceaccount "+ownerapi.ServiceAccount+" for the audience "+ownerapi.Audience+")")
			return
		}
		err := v.Verify(r.Context(), token)
		switch {
		case errors.Is(err, ErrNotOwner):
			log.Info("owner request refused", "path", r.URL.Path, "reason", ownerapi.ReasonNotOwner, "error", err.Error())
			refuseOwner(w, http.StatusForbidden, ownerapi.ReasonNotOwner, err.Error())
			return
		case errors.Is(err, ErrRefused):
			log.Info("owner request refused", "path", r.URL.Path, "reason", ownerapi.ReasonTokenRefused, "error", err.Error())
			refuseOwner(w, http.StatusUnauthorized, ownerapi.ReasonTokenRefused, err.Error())
			return
		case err != nil:
			log.Warn("owner token not verified", "path", r.URL.Path, "error", err.Error())
			refuseOwner(w, http.StatusServiceUnavailable, ownerapi.ReasonTokenUnverified, "the owner's token could not be verified now; retry")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseOwner writes a refusal of the owner's credential.
func refuseOwner(w http.ResponseWriter, status int, reason, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `OpenFief-Owner-Token realm="openfief-core"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ownerapi.ErrorResponse{Error: reason + ": " + msg, Reason: reason}) // the client is gone if this fails
}
