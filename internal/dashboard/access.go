package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ContentSecurityPolicy is sent with every response: the page may load
// only its own embedded script, style and images, connect only to itself
// (the event stream), and be framed by no one (OF-12).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

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
// run's token as the first segment of the path: every page lives under
// /TOKEN/, and links between pages are relative, so they keep it.
//
// The token is never a cookie (OF-12): browsers scope cookies by host, not
// by port, so a cookie set by 127.0.0.1:PORT is also sent to every other
// listener on 127.0.0.1, including one another local user runs. A path is
// sent only to the origin it was typed for; a page of another origin can
// neither read it (the same-origin policy) nor learn it from a Referer
// (Referrer-Policy: no-referrer).
type access struct {
	token string
	port  int
	// allowPost admits POSTs from the page's own origin, for approvals.
	allowPost bool
	next      http.Handler
}

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
		// can send without a preflight this server never answers.
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
	rest, ok := a.strip(r.URL.EscapedPath())
	if !ok {
		http.Error(w, "refused: no valid token in the address; open the URL `openfief dashboard` printed", http.StatusUnauthorized)
		return
	}
	if rest == "" {
		// /TOKEN without the slash: relative links need the directory.
		moveOn(w, "/"+a.token+"/")
		return
	}
	inner := r.Clone(r.Context())
	inner.URL.RawPath = rest
	inner.URL.Path, _ = url.PathUnescape(rest) // rest comes from a parsed URL: it unescapes
	inner.RequestURI = ""
	a.next.ServeHTTP(w, inner)
}

// strip takes the token off the front of an escaped path: "/TOKEN/x"
// gives "/x", "/TOKEN" gives "". The comparison takes the same time
// whatever the path holds.
func (a *access) strip(escaped string) (string, bool) {
	seg, rest, _ := strings.Cut(strings.TrimPrefix(escaped, "/"), "/")
	if !a.valid(seg) {
		return "", false
	}
	if rest == "" && !strings.HasSuffix(escaped, "/") {
		return "", true
	}
	return "/" + rest, true
}

// moveOn sends the browser to target, a path of this server, with a page
// of this origin (a meta refresh, which the CSP allows). target is built
// here, never taken from the request.
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
