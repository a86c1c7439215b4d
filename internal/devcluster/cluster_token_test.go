//go:build cluster

package devcluster_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestServiceAccountTokens checks that the minimal control plane issues
// audience-bound ServiceAccount tokens, reviews them per audience, and serves
// the key that signed them.
func TestServiceAccountTokens(t *testing.T) {
	c := devcluster.Shared(t, devcluster.Options{Mode: devcluster.Minimal})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	ns := createNamespace(t, ctx, c, "tokens", nil)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "p", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{"openfief-egress"},
			ExpirationSeconds: &expiry,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	token := tr.Status.Token
	if token == "" {
		t.Fatal("TokenRequest returned no token")
	}

	review := func(audience string) authenticationv1.TokenReviewStatus {
		t.Helper()
		r, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenReview for %s: %v", audience, err)
		}
		return r.Status
	}
	wantUser := fmt.Sprintf("system:serviceaccount:%s:p", ns)
	if st := review("openfief-egress"); !st.Authenticated || st.User.Username != wantUser ||
		!slices.Contains(st.Audiences, "openfief-egress") {
		t.Errorf("TokenReview for openfief-egress = authenticated %v as %q for %v, want authenticated as %q",
			st.Authenticated, st.User.Username, st.Audiences, wantUser)
	}
	if st := review("openfief-core"); st.Authenticated {
		t.Errorf("TokenReview for openfief-core authenticated the token as %q; want rejected", st.User.Username)
	}

	// The discovery document names the issuer, and the JWKS holds the key
	// that verifies the token.
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(get(t, c.Config, "/.well-known/openid-configuration"), &discovery); err != nil {
		t.Fatalf("decoding the discovery document: %v", err)
	}
	var jwks jose.JSONWebKeySet
	if err := json.Unmarshal(get(t, c.Config, "/openid/v1/jwks"), &jwks); err != nil {
		t.Fatalf("decoding the JWKS: %v", err)
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512})
	if err != nil {
		t.Fatalf("parsing the token: %v", err)
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := jwks.Key(kid)
	if len(keys) == 0 {
		t.Fatalf("JWKS has no key %q (keys: %d)", kid, len(jwks.Keys))
	}
	payload, err := jws.Verify(keys[0].Key)
	if err != nil {
		t.Fatalf("JWKS key %q does not verify the token: %v", kid, err)
	}
	var claims struct {
		Issuer   string          `json:"iss"`
		Audience json.RawMessage `json:"aud"`
		Subject  string          `json:"sub"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("decoding the claims: %v", err)
	}
	if claims.Issuer != discovery.Issuer || claims.Subject != wantUser {
		t.Errorf("claims iss=%q sub=%q, want iss=%q sub=%q", claims.Issuer, claims.Subject, discovery.Issuer, wantUser)
	}

	// The key must not verify a token whose claims were altered.
	parts := strings.Split(token, ".")
	forged := bytes.Replace(payload, []byte(`:p"`), []byte(`:q"`), 1)
	parts[1] = base64.RawURLEncoding.EncodeToString(forged)
	jws, err = jose.ParseSignedCompact(strings.Join(parts, "."), []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512})
	if err != nil {
		t.Fatalf("parsing the forged token: %v", err)
	}
	if _, err := jws.Verify(keys[0].Key); err == nil {
		t.Error("the JWKS key verified a token with altered claims")
	}
}

// get fetches path from the API server with cfg's credentials.
func get(t *testing.T, cfg *rest.Config, path string) []byte {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body
}

// createNamespace creates a namespace with a generated name starting with
// prefix and the given labels, deleted when the test ends.
func createNamespace(t *testing.T, ctx context.Context, c *devcluster.Cluster, prefix string, labels map[string]string) string {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}
