package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// failingReviewer is a TokenReviewer whose API server cannot be reached.
type failingReviewer struct{}

func (failingReviewer) Review(context.Context, string) (string, error) {
	return "", errors.New("connection refused")
}

// TestRequireOwnerUnverified: when the review cannot be made the owner API
// answers 503 with its reason, and the handler does not run; no control
// plane is needed.
func TestRequireOwnerUnverified(t *testing.T) {
	v := newOwnerVerifier(failingReviewer{}, plugins.Namespace, Options{})
	ran := false
	h := RequireOwner(v, nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"alg":"RS256"}`)) + "." + enc(fmt.Appendf(nil, `{"exp":%d}`, time.Now().Add(time.Hour).Unix())) + "." + enc([]byte("sig"))
	req := httptest.NewRequest(http.MethodGet, "/v1/status", nil)
	req.Header.Set(ownerapi.HeaderOwnerToken, tok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var e ownerapi.ErrorResponse
	if rec.Code != http.StatusServiceUnavailable || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Reason != ownerapi.ReasonTokenUnverified || ran {
		t.Errorf("%d %s (handler ran: %v), want 503 %s", rec.Code, rec.Body, ran, ownerapi.ReasonTokenUnverified)
	}
	if strings.Contains(rec.Body.String(), tok) {
		t.Error("the answer holds the token")
	}
}
