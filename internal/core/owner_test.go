//go:build cluster

package core

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// countingConnector is echoConnector counting the files it was sent.
type countingConnector struct {
	echoConnector
	imports *atomic.Int32
}

func (c countingConnector) ImportFile(ctx context.Context, s *connect.ClientStream[connectorv1.ImportFileRequest]) (*connect.Response[connectorv1.ImportFileResponse], error) {
	c.imports.Add(1)
	return c.echoConnector.ImportFile(ctx, s)
}

// ownerCall is one request to the owner API.
type ownerCall struct {
	method, path string
}

// ownerCalls are the owner API's requests: both status paths and an import.
func ownerCalls(instance string) []ownerCall {
	return []ownerCall{
		{http.MethodGet, ownerapi.PathStatus},
		{http.MethodGet, ownerapi.StatusPath(instance)},
		{http.MethodPost, ownerapi.ImportPath(instance, false)},
	}
}

// callOwner sends c to base with the owner header set to each of tokens
// (none when empty) and returns the status and the body.
func callOwner(t *testing.T, hc *http.Client, base string, c ownerCall, tokens ...string) (int, string) {
	t.Helper()
	var body io.Reader
	if c.method == http.MethodPost {
		body = strings.NewReader("a;b\n")
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ownerapi.HeaderFileName, "statement.csv")
	for _, tok := range tokens {
		req.Header.Add(ownerapi.HeaderOwnerToken, tok)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// expiredJWT is a JWT-shaped token, unsigned, whose exp has passed: what a
// token looks like after its lifetime (TokenRequest mints none shorter than
// ten minutes; internal/core/auth's TestOwnerVerifier expires a real one by
// moving the clock).
func expiredJWT(ns string) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{
		"aud": []string{ownerapi.Audience}, "sub": ownerapi.OwnerUsername(ns),
		"exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(),
	})
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc(claims) + "." + enc([]byte("signature"))
}

// TestOwnerAPIRequiresOwnerToken is the regression test of OF-18: the
// owner API, served by the real core running as its
// ServiceAccount with deploy/core's RBAC, refuses every request but
// /healthz without the owner's token, both status paths and imports (the
// connector is never sent the file), whether called directly, as `openfief
// dev` and a pod on the cluster network reach it, or through the API
// server's real service proxy, as the CLI does; the owner's token is
// accepted on both paths.
func TestOwnerAPIRequiresOwnerToken(t *testing.T) {
	cs, cfg := cluster(t)
	ns := plugins.Namespace
	cl := apiClient(t, cfg)
	const instance = "owner-fx"
	var imports atomic.Int32
	url := servePlugin(t, jwksDir(t, cs), instance, countingConnector{imports: &imports})
	asCore := applyCoreRBAC(t, cs, cfg)
	// The API server proxies only to addresses that are not loopback: the
	// owner listener binds this machine's own address.
	hostIP := testutil.HostAddress(t)
	c, err := Start(t.Context(), asCore, Options{
		Store: openStore(t), PluginAddr: "127.0.0.1:0", OwnerAddr: net.JoinHostPort(hostIP, "0"),
		Resolve:   func(string) string { return url },
		Scheduler: manualSchedule,
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := cl.Create(t.Context(), testutil.MakePlugin(instance, testutil.Image("fx")).Obj()); err != nil {
		t.Fatal(err)
	}
	setRunning(t, cl, instance, true)

	owner := testutil.OwnerToken(t, cs, ns)
	pluginOwn := func() string {
		ensureSA(t, cs, plugins.ServiceAccountName(instance))
		return pluginToken(t, cs, instance)
	}()
	ownerWrongAudience, _ := testutil.ServiceAccountToken(t, cs, ns, ownerapi.ServiceAccount, plugins.AudienceCore)
	otherSA, _ := testutil.ServiceAccountToken(t, cs, ns, plugins.ServiceAccountName(instance), ownerapi.Audience)
	refusals := map[string]struct {
		tokens []string
		status int
		reason string
	}{
		"no credential":        {nil, http.StatusUnauthorized, ownerapi.ReasonTokenRequired},
		"a plugin's own token": {[]string{pluginOwn}, http.StatusUnauthorized, ownerapi.ReasonTokenRefused},
		"the owner's ServiceAccount, another audience": {[]string{ownerWrongAudience}, http.StatusUnauthorized, ownerapi.ReasonTokenRefused},
		"another ServiceAccount, the owner's audience": {[]string{otherSA}, http.StatusForbidden, ownerapi.ReasonNotOwner},
		"an expired token":                     {[]string{expiredJWT(ns)}, http.StatusUnauthorized, ownerapi.ReasonTokenRefused},
		"the owner's token and a second value": {[]string{owner, pluginOwn}, http.StatusUnauthorized, ownerapi.ReasonTokenRequired},
	}
	secrets := []string{owner, pluginOwn, ownerWrongAudience, otherSA}
	check := func(path string, hc *http.Client, base string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, path+": the first sync stored", func() (bool, string) {
			code, body := callOwner(t, hc, base, ownerCall{http.MethodGet, ownerapi.StatusPath(instance)}, owner)
			return code == http.StatusOK && strings.Contains(body, `"lastOK":true`), fmt.Sprintf("%d %s", code, body)
		})
		for what, tc := range refusals {
			for _, call := range ownerCalls(instance) {
				before := imports.Load()
				code, body := callOwner(t, hc, base, call, tc.tokens...)
				var e ownerapi.ErrorResponse
				if code != tc.status || json.Unmarshal([]byte(body), &e) != nil || e.Reason != tc.reason {
					t.Errorf("%s, %s %s %s: %d %s, want %d %s", path, what, call.method, call.path, code, body, tc.status, tc.reason)
				}
				if imports.Load() != before {
					t.Errorf("%s, %s: the file reached the connector", path, what)
				}
				for _, s := range secrets {
					if strings.Contains(body, s) {
						t.Errorf("%s, %s: the answer holds a token", path, what)
					}
				}
			}
		}
		for _, call := range ownerCalls(instance) {
			before := imports.Load()
			if code, body := callOwner(t, hc, base, call, owner); code != http.StatusOK {
				t.Errorf("%s, the owner's token, %s %s: %d %s", path, call.method, call.path, code, body)
			}
			if call.method == http.MethodPost && imports.Load() != before+1 {
				t.Errorf("%s, the owner's token: the file did not reach the connector", path)
			}
		}
	}

	direct := "http://" + c.OwnerAddr()
	check("direct", http.DefaultClient, direct)
	if code, body := callOwner(t, http.DefaultClient, direct, ownerCall{http.MethodGet, "/healthz"}); code != http.StatusOK {
		t.Errorf("/healthz without a credential: %d %s, want 200 (the kubelet's probe)", code, body)
	}

	// Through the API server's service proxy, as the CLI calls it: the
	// Service openfief-core's owner port backed by this core.
	_, port, _ := net.SplitHostPort(c.OwnerAddr())
	testutil.ServeServiceAt(t, cs, ns, ownerapi.ServiceName, ownerapi.ServicePort, DefaultServiceAccount, hostIP, port)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/" + ns + "/services/" + ownerapi.ServiceName + ":" + ownerapi.ServicePort + "/proxy"
	check("service proxy", hc, proxy)
	// The owner's token as the bearer credential never reaches the core:
	// the API server authenticates the caller (here by its client
	// certificate) and drops Authorization before proxying.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, proxy+ownerapi.PathStatus, nil)
	req.Header.Set("Authorization", "Bearer "+owner)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("service proxy, the owner's token as Authorization only: 200 %s, want a refusal", b)
	}
}

// TestOwnerRole: a user bound to deploy/core's Role openfief-owner, and no
// other, may mint the owner's token and reach the core's owner port through
// the service proxy, and nothing near it; neither a plugin's ServiceAccount
// nor the core's nor a user without the binding may mint the owner's token.
func TestOwnerRole(t *testing.T) {
	cs, cfg := cluster(t)
	ns := plugins.Namespace
	applyCoreRBAC(t, cs, cfg)
	const alice, mallory = "alice-owner", "mallory"
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), roleBinding(alice), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pluginUser := "system:serviceaccount:" + ns + ":" + plugins.ServiceAccountName("fx")
	mint := authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: ownerapi.ServiceAccount}
	testutil.Eventually(t, 30*time.Second, "the authorizer to grant the owner's Role", func() (bool, string) {
		ok, reason := userAllowed(t, cs, alice, nil, mint)
		return ok, reason
	})
	for what, tc := range map[string]struct {
		user   string
		groups []string
		attrs  authorizationv1.ResourceAttributes
		want   bool
	}{
		"the owner mints":                    {alice, nil, mint, true},
		"the owner proxies a GET":            {alice, nil, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "services", Subresource: "proxy", Name: "openfief-core:owner"}, true},
		"the owner proxies a POST":           {alice, nil, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "services", Subresource: "proxy", Name: "openfief-core:owner"}, true},
		"the owner, the core's connect port": {alice, nil, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "services", Subresource: "proxy", Name: "openfief-core:connect"}, false},
		"the owner mints the core's token":   {alice, nil, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: "openfief-core"}, false},
		"a plugin mints the owner's token":   {pluginUser, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, mint, false},
		"the core mints the owner's token":   {coreUser, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, mint, false},
		"a user without the Role mints":      {mallory, []string{"system:authenticated"}, mint, false},
	} {
		if got, reason := userAllowed(t, cs, tc.user, tc.groups, tc.attrs); got != tc.want {
			t.Errorf("%s: allowed %v (%s), want %v", what, got, reason, tc.want)
		}
	}
}

func roleBinding(user string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "owner-" + user, Namespace: plugins.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: ownerapi.OwnerRole},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
}

// userAllowed asks the authorizer whether user (in groups) may do attrs.
func userAllowed(t *testing.T, cs kubernetes.Interface, user string, groups []string, attrs authorizationv1.ResourceAttributes) (bool, string) {
	t.Helper()
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed, sar.Status.Reason
}
