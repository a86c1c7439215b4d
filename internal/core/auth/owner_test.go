//go:build cluster

package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestOwnerVerifier: only a token of openfief-owner in the core's namespace,
// for the audience openfief-core-owner, is the owner's (OF-18). A plugin's
// own token, the owner's ServiceAccount for another audience, another
// ServiceAccount (a plugin's, the core's, openfief-owner of another
// namespace) for the owner's audience, garbage and an expired token are
// refused; another identity with the right audience is told apart (403).
func TestOwnerVerifier(t *testing.T) {
	cs, _ := cluster(t)
	ns := plugins.Namespace
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	v, err := NewOwnerVerifier(cs.AuthenticationV1(), ns, Options{Now: func() time.Time { return *now.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	owner := testutil.OwnerToken(t, cs, ns)
	if err := v.Verify(ctx, owner); err != nil {
		t.Fatalf("the owner's token: %v", err)
	}

	pluginOwn, _ := token(t, cs, ns, plugins.ServiceAccountName("fx"), plugins.AudienceCore)
	ownerCoreAud, _ := token(t, cs, ns, ownerapi.ServiceAccount, plugins.AudienceCore)
	ownerEgressAud, _ := token(t, cs, ns, ownerapi.ServiceAccount, plugins.AudienceEgress)
	ownerAPIAud, _ := token(t, cs, ns, ownerapi.ServiceAccount, "https://kubernetes.default.svc.cluster.local")
	pluginOwnerAud, _ := token(t, cs, ns, plugins.ServiceAccountName("fx"), ownerapi.Audience)
	coreOwnerAud, _ := token(t, cs, ns, "openfief-core", ownerapi.Audience)
	outside, _ := token(t, cs, "other", ownerapi.ServiceAccount, ownerapi.Audience)
	for what, tc := range map[string]struct {
		token    string
		notOwner bool
	}{
		"a plugin's own openfief-core token":           {pluginOwn, false},
		"the owner's ServiceAccount, core audience":    {ownerCoreAud, false},
		"the owner's ServiceAccount, egress audience":  {ownerEgressAud, false},
		"the owner's ServiceAccount, API audience":     {ownerAPIAud, false},
		"a plugin's ServiceAccount, owner audience":    {pluginOwnerAud, true},
		"the core's ServiceAccount, owner audience":    {coreOwnerAud, true},
		"openfief-owner of another namespace":          {outside, true},
		"garbage":                                      {"not-a-token", false},
		"the owner's token with its signature removed": {owner[:strings.LastIndex(owner, ".")+1], false},
		"empty": {"", false},
	} {
		err := v.Verify(ctx, tc.token)
		if !errors.Is(err, ErrRefused) || errors.Is(err, ErrNotOwner) != tc.notOwner {
			t.Errorf("%s: %v, want ErrRefused (ErrNotOwner: %v)", what, err, tc.notOwner)
			continue
		}
		if tc.token != "" && strings.Contains(err.Error(), tc.token) {
			t.Errorf("%s: the error holds the token", what)
		}
	}

	// The owner's token, accepted and cached, is refused once the core's
	// clock passes its exp (TokenRequest mints nothing shorter than ten
	// minutes, so the clock moves instead).
	later := start.Add(time.Duration(ownerapi.TokenSeconds+1) * time.Second)
	now.Store(&later)
	if err := v.Verify(ctx, owner); !errors.Is(err, ErrRefused) || errors.Is(err, ErrNotOwner) {
		t.Fatalf("the owner's expired token: %v, want ErrRefused", err)
	}
}

// TestRequireOwner serves a handler behind RequireOwner on real TCP: only
// one owner token in the owner's header passes, the handler never sees the
// header, and every refusal names its reason with 401 or 403 and holds no
// token.
func TestRequireOwner(t *testing.T) {
	cs, _ := cluster(t)
	ns := plugins.Namespace
	v, err := NewOwnerVerifier(cs.AuthenticationV1(), ns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	srv := httptest.NewServer(RequireOwner(v, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprintf(w, "ok %d", len(r.Header.Values(ownerapi.HeaderOwnerToken)))
	})))
	defer srv.Close()
	owner := testutil.OwnerToken(t, cs, ns)
	pluginOwn, _ := token(t, cs, ns, plugins.ServiceAccountName("rq"), plugins.AudienceCore)
	pluginOwnerAud, _ := token(t, cs, ns, plugins.ServiceAccountName("rq"), ownerapi.Audience)
	for what, tc := range map[string]struct {
		headers       []string
		authorization string
		status        int
		reason        string
	}{
		"the owner's token":                  {[]string{owner}, "", http.StatusOK, ""},
		"no token":                           {nil, "", http.StatusUnauthorized, ownerapi.ReasonTokenRequired},
		"the owner's token as a bearer only": {nil, "Bearer " + owner, http.StatusUnauthorized, ownerapi.ReasonTokenRequired},
		"the owner's token twice":            {[]string{owner, owner}, "", http.StatusUnauthorized, ownerapi.ReasonTokenRequired},
		"a plugin's own token":               {[]string{pluginOwn}, "", http.StatusUnauthorized, ownerapi.ReasonTokenRefused},
		"a plugin's token for the owner":     {[]string{pluginOwnerAud}, "", http.StatusForbidden, ownerapi.ReasonNotOwner},
		"garbage":                            {[]string{"x.y.z"}, "", http.StatusUnauthorized, ownerapi.ReasonTokenRefused},
	} {
		before := reached.Load()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/plugins/fx/import", strings.NewReader("file"))
		for _, h := range tc.headers {
			req.Header.Add(ownerapi.HeaderOwnerToken, h)
		}
		if tc.authorization != "" {
			req.Header.Set("Authorization", tc.authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", what, resp.StatusCode, body, tc.status)
			continue
		}
		for _, tok := range []string{owner, pluginOwn, pluginOwnerAud} {
			if strings.Contains(string(body), tok) {
				t.Errorf("%s: the answer holds a token", what)
			}
		}
		if tc.status == http.StatusOK {
			if string(body) != "ok 0" {
				t.Errorf("%s: the handler answered %q, want it to see no owner header", what, body)
			}
			continue
		}
		if reached.Load() != before {
			t.Errorf("%s: the handler ran", what)
		}
		var e ownerapi.ErrorResponse
		if err := json.Unmarshal(body, &e); err != nil || e.Reason != tc.reason || !strings.HasPrefix(e.Error, tc.reason+": ") {
			t.Errorf("%s: %s, want the reason %s", what, body, tc.reason)
		}
	}
}
