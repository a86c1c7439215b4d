package dashboard

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAccess checks the guard in front of every page: Host, method and
// the token as the path's first segment, with the security headers on every
// answer, refusals included, and no cookie ever set.
func TestAccess(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	var reached []string
	a := &access{token: token, port: 4242, next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.URL.Path+"?"+r.URL.RawQuery)
		_, _ = w.Write([]byte("page"))
	})}
	for name, tc := range map[string]struct {
		method, target, host string
		cookie               *http.Cookie
		want                 int
		// inner is the path and query the pages see.
		inner  string
		moveOn string
	}{
		"table":                     {target: "/" + token + "/", want: http.StatusOK, inner: "/?"},
		"a plugin's page":           {target: "/" + token + "/plugins/fx", want: http.StatusOK, inner: "/plugins/fx?"},
		"the query stays":           {target: "/" + token + "/events?plugin=fx", want: http.StatusOK, inner: "/events?plugin=fx"},
		"escapes stay escapes":      {target: "/" + token + "/plugins/a%2Fb", want: http.StatusOK, inner: "/plugins/a/b?"},
		"localhost works too":       {target: "/" + token + "/", host: "localhost:4242", want: http.StatusOK, inner: "/?"},
		"the token without a slash": {target: "/" + token, want: http.StatusOK, moveOn: "/" + token + "/"},
		"no token":                  {target: "/", want: http.StatusUnauthorized},
		"no token, a page":          {target: "/plugins/fx", want: http.StatusUnauthorized},
		"the old query token":       {target: "/?token=" + token, want: http.StatusUnauthorized},
		"wrong token":               {target: "/" + strings.Repeat("0", 32) + "/", want: http.StatusUnauthorized},
		"token prefix":              {target: "/" + token[:31] + "/", want: http.StatusUnauthorized},
		"token and more":            {target: "/" + token + "0/", want: http.StatusUnauthorized},
		"token escaped":             {target: "/%30123456789abcdef0123456789abcdef/", want: http.StatusUnauthorized},
		"token later in the path":   {target: "/x/" + token + "/", want: http.StatusUnauthorized},
		"a cookie is no credential": {target: "/", cookie: &http.Cookie{Name: "openfief-dashboard-4242", Value: token}, want: http.StatusUnauthorized},
		"rebound host":              {target: "/" + token + "/", host: "evil.example.com:4242", want: http.StatusMisdirectedRequest},
		"host without port":         {target: "/" + token + "/", host: "127.0.0.1", want: http.StatusMisdirectedRequest},
		"another port":              {target: "/" + token + "/", host: "127.0.0.1:4243", want: http.StatusMisdirectedRequest},
		"post":                      {method: http.MethodPost, target: "/" + token + "/", want: http.StatusMethodNotAllowed},
	} {
		t.Run(name, func(t *testing.T) {
			reached = nil
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			r := httptest.NewRequest(method, tc.target, nil)
			r.Host = "127.0.0.1:4242"
			if tc.host != "" {
				r.Host = tc.host
			}
			if tc.cookie != nil {
				r.AddCookie(tc.cookie)
			}
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			switch {
			case tc.inner != "":
				if len(reached) != 1 || reached[0] != tc.inner {
					t.Errorf("the pages saw %q, want %q", reached, tc.inner)
				}
			case len(reached) != 0:
				t.Errorf("the pages were reached: %q", reached)
			}
			if tc.moveOn != "" {
				want := `<meta http-equiv="refresh" content="0;url=` + html.EscapeString(tc.moveOn) + `">`
				if !strings.Contains(w.Body.String(), want) {
					t.Errorf("the page does not move on with %s:\n%s", want, w.Body)
				}
			} else if strings.Contains(w.Body.String(), token) {
				t.Errorf("the answer repeats the token: %s", w.Body)
			}
			if set := w.Header().Values("Set-Cookie"); len(set) != 0 {
				t.Errorf("the dashboard set a cookie: %q", set)
			}
			for h, want := range map[string]string{
				"Content-Security-Policy": ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
				"X-Frame-Options":         "DENY",
				"Cache-Control":           "no-store",
			} {
				if got := w.Header().Get(h); got != want {
					t.Errorf("%s = %q, want %q", h, got, want)
				}
			}
		})
	}
}

// TestNewToken: 128 bits, hex, different every time.
func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := newToken()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" {
			t.Fatalf("token %q is not 32 hex digits", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
}

// TestAccessPost: approvals are posted only when the dashboard allows them,
// from the page's own origin, as JSON, under the token's path.
func TestAccessPost(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	withToken := "/" + token + "/plugins/fx/approve"
	for name, tc := range map[string]struct {
		allowPost         bool
		origin, mediaType string
		target            string
		host              string
		want              int
	}{
		"allowed":                  {allowPost: true, origin: "http://127.0.0.1:4242", mediaType: "application/json", target: withToken, want: http.StatusOK},
		"allowed on localhost":     {allowPost: true, origin: "http://localhost:4242", mediaType: "application/json", target: withToken, host: "localhost:4242", want: http.StatusOK},
		"read-only dashboard":      {origin: "http://127.0.0.1:4242", mediaType: "application/json", target: withToken, want: http.StatusMethodNotAllowed},
		"no origin":                {allowPost: true, mediaType: "application/json", target: withToken, want: http.StatusForbidden},
		"other origin":             {allowPost: true, origin: "http://evil.example.com", mediaType: "application/json", target: withToken, want: http.StatusForbidden},
		"origin of the other name": {allowPost: true, origin: "http://localhost:4242", mediaType: "application/json", target: withToken, want: http.StatusForbidden},
		"form body":                {allowPost: true, origin: "http://127.0.0.1:4242", mediaType: "application/x-www-form-urlencoded", target: withToken, want: http.StatusForbidden},
		"no token":                 {allowPost: true, origin: "http://127.0.0.1:4242", mediaType: "application/json", target: "/plugins/fx/approve", want: http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			reached := false
			a := &access{token: token, port: 4242, allowPost: tc.allowPost, next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })}
			r := httptest.NewRequest(http.MethodPost, tc.target, strings.NewReader(`{}`))
			r.Host = "127.0.0.1:4242"
			if tc.host != "" {
				r.Host = tc.host
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			r.Header.Set("Content-Type", tc.mediaType)
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r)
			if w.Code != tc.want || reached != (tc.want == http.StatusOK) {
				t.Errorf("status %d (handler reached: %v), want %d: %s", w.Code, reached, tc.want, w.Body)
			}
		})
	}
}
