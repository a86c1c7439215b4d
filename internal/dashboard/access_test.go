package dashboard

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAccess checks the guard in front of every page: Host, method and
// token, with the security headers on every answer, refusals included.
func TestAccess(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	reached := 0
	a := &access{token: token, port: 4242, next: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		_, _ = w.Write([]byte("page"))
	})}
	cookie := &http.Cookie{Name: "openfief-dashboard-4242", Value: token}
	for name, tc := range map[string]struct {
		method, target, host string
		cookie               *http.Cookie
		want                 int
		moveOn               string
	}{
		"token moves into a cookie":        {target: "/?token=" + token, want: http.StatusOK, moveOn: "/"},
		"other query parameters stay":      {target: "/events?plugin=fx&token=" + token, want: http.StatusOK, moveOn: "/events?plugin=fx"},
		"localhost works too":              {target: "/?token=" + token, host: "localhost:4242", want: http.StatusOK, moveOn: "/"},
		"cookie":                           {target: "/", cookie: cookie, want: http.StatusOK},
		"no token":                         {target: "/", want: http.StatusUnauthorized},
		"wrong token":                      {target: "/?token=" + strings.Repeat("0", 32), want: http.StatusUnauthorized},
		"token prefix":                     {target: "/?token=" + token[:31], want: http.StatusUnauthorized},
		"wrong cookie":                     {target: "/", cookie: &http.Cookie{Name: cookie.Name, Value: "x"}, want: http.StatusUnauthorized},
		"cookie of another port":           {target: "/", cookie: &http.Cookie{Name: "openfief-dashboard-4243", Value: token}, want: http.StatusUnauthorized},
		"rebound host":                     {target: "/?token=" + token, host: "evil.example.com:4242", want: http.StatusMisdirectedRequest},
		"host without port":                {target: "/", host: "127.0.0.1", cookie: cookie, want: http.StatusMisdirectedRequest},
		"another port":                     {target: "/", host: "127.0.0.1:4243", cookie: cookie, want: http.StatusMisdirectedRequest},
		"post":                             {method: http.MethodPost, target: "/", cookie: cookie, want: http.StatusMethodNotAllowed},
		"empty token parameter is refused": {target: "/?token=", cookie: cookie, want: http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			reached = 0
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
			if (reached == 1) != (tc.want == http.StatusOK && tc.moveOn == "") {
				t.Errorf("the page was reached %d times", reached)
			}
			if tc.moveOn != "" {
				want := `<meta http-equiv="refresh" content="0;url=` + html.EscapeString(tc.moveOn) + `">`
				if !strings.Contains(w.Body.String(), want) {
					t.Errorf("the first visit's page does not move on with %s:\n%s", want, w.Body)
				}
				set := w.Header().Get("Set-Cookie")
				for _, part := range []string{"openfief-dashboard-4242=" + token, "Path=/", "HttpOnly", "SameSite=Strict"} {
					if !strings.Contains(set, part) {
						t.Errorf("Set-Cookie %q lacks %q", set, part)
					}
				}
			}
			if strings.Contains(w.Body.String(), token) {
				t.Errorf("the answer repeats the token: %s", w.Body)
			}
			for h, want := range map[string]string{
				"Content-Security-Policy": ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
				"X-Frame-Options":         "DENY",
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
// from the page's own origin, as JSON, with the cookie.
func TestAccessPost(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	cookie := &http.Cookie{Name: "openfief-dashboard-4242", Value: token}
	for name, tc := range map[string]struct {
		allowPost         bool
		origin, mediaType string
		cookie            *http.Cookie
		host              string
		want              int
	}{
		"allowed":                  {allowPost: true, origin: "http://127.0.0.1:4242", mediaType: "application/json", cookie: cookie, want: http.StatusOK},
		"allowed on localhost":     {allowPost: true, origin: "http://localhost:4242", mediaType: "application/json", cookie: cookie, host: "localhost:4242", want: http.StatusOK},
		"read-only dashboard":      {origin: "http://127.0.0.1:4242", mediaType: "application/json", cookie: cookie, want: http.StatusMethodNotAllowed},
		"no origin":                {allowPost: true, mediaType: "application/json", cookie: cookie, want: http.StatusForbidden},
		"other origin":             {allowPost: true, origin: "http://evil.example.com", mediaType: "application/json", cookie: cookie, want: http.StatusForbidden},
		"origin of the other name": {allowPost: true, origin: "http://localhost:4242", mediaType: "application/json", cookie: cookie, want: http.StatusForbidden},
		"form body":                {allowPost: true, origin: "http://127.0.0.1:4242", mediaType: "application/x-www-form-urlencoded", cookie: cookie, want: http.StatusForbidden},
		"no cookie":                {allowPost: true, origin: "http://127.0.0.1:4242", mediaType: "application/json", want: http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			reached := false
			a := &access{token: token, port: 4242, allowPost: tc.allowPost, next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })}
			r := httptest.NewRequest(http.MethodPost, "/plugins/fx/approve", strings.NewReader(`{}`))
			r.Host = "127.0.0.1:4242"
			if tc.host != "" {
				r.Host = tc.host
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			r.Header.Set("Content-Type", tc.mediaType)
			if tc.cookie != nil {
				r.AddCookie(tc.cookie)
			}
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r)
			if w.Code != tc.want || reached != (tc.want == http.StatusOK) {
				t.Errorf("status %d (handler reached: %v), want %d: %s", w.Code, reached, tc.want, w.Body)
			}
		})
	}
}
