package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"strconv"
)

// ContentSecurityPolicy is sent with every response: the page may load
// only its own embedded script, style and images, connect only to itself
// (the event stream), and be framed by no one (OF-12).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// tokenParam is the query parameter of the URL the command prints.
const tokenParam = "token"

// newToken returns 128 random bits, hex-encoded.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// access guards every request: a Host header naming this server on
// loopback (a DNS-rebinding page names its own host), only GET and HEAD
// (and, when approving is on, a POST from the page's own origin), and the
// run's token, from the cookie or, once, from the URL. A token in
// the URL is moved into an HttpOnly, SameSite=Strict cookie and the browser
// is sent on to the same page without it, so it leaves no trace in the
// address bar or in the page's links.
type access struct {
	token string
	port  int
	// allowPost admits POSTs from the page's own origin, for approvals.
	allowPost bool
	next      http.Handler
}

// cookieName is per port: cookies are shared by every port of a host.
func (a *access) cookieName() string { return "openfief-dashboard-" + strconv.Itoa(a.port) }

func (a *access) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	port := strconv.Itoa(a.port)
	if r.Host != "127.0.0.1:"+port && r.Host != "localhost:"+port {
		http.Error(w, "refused: this dashboard answers only to 127.0.0.1:"+port+" or localhost:"+port, http.StatusMisdirectedRequest)
		return
	}
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
	case r.Method == http.MethodPost && a.allowPost:
		// Only the page itself may post: its own origin (browsers send
		// Origin with every POST) and a JSON body, which no cross-site form
		// can send without a preflight this server never answers. The
		// SameSite=Strict cookie is the third lock.
		if r.Header.Get("Origin") != "http://"+r.Host || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "refused: approvals come only from this dashboard's own page", http.StatusForbidden)
			return
		}
	default:
		if a.allowPost {
			h.Set("Allow", "GET, HEAD, POST")
		} else {
			h.Set("Allow", "GET, HEAD")
		}
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if q := r.URL.Query(); q.Has(tokenParam) && r.Method != http.MethodPost {
		if !a.valid(q.Get(tokenParam)) {
			http.Error(w, "refused: the token is not this dashboard's; open the URL `openfief dashboard` printed", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: a.cookieName(), Value: a.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		clean := *r.URL
		q.Del(tokenParam)
		clean.RawQuery = q.Encode()
		moveOn(w, clean.RequestURI())
		return
	}
	c, err := r.Cookie(a.cookieName())
	if err != nil || !a.valid(c.Value) {
		http.Error(w, "refused: no valid token; open the URL `openfief dashboard` printed", http.StatusUnauthorized)
		return
	}
	a.next.ServeHTTP(w, r)
}

// moveOn sends the browser to target with a page of this origin (a meta
// refresh, which the CSP allows) rather than a 303: when the first visit
// came from another site, such as the launcher file, a redirect would stay
// part of that cross-site navigation and the browser would withhold the
// SameSite=Strict cookie just set; a navigation this page starts is
// same-site. target comes from the request's own path and query, escaped.
func moveOn(w http.ResponseWriter, target string) {
	t := html.EscapeString(target)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s"><title>OpenFief dashboard</title></head>
<body><p><a href="%s">Continue to the OpenFief dashboard</a></p></body></html>
`, t, t)
}

// valid compares a presented token with the run's in constant time.
func (a *access) valid(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(a.token)) == 1
}
