package egress

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestParseProxyAuthorization(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := map[string]struct {
		values []string
		token  string
		err    error
	}{
		"valid":              {[]string{"Basic " + b64("plugin:abc.def.ghi")}, "abc.def.ghi", nil},
		"scheme any case":    {[]string{"basic " + b64("plugin:t")}, "t", nil},
		"colon in token":     {[]string{"Basic " + b64("plugin:a:b")}, "a:b", nil},
		"absent":             {nil, "", errNoCredentials},
		"empty":              {[]string{""}, "", errNoCredentials},
		"two headers":        {[]string{"Basic " + b64("plugin:t"), "Basic " + b64("plugin:t")}, "", errBadCredentials},
		"bearer":             {[]string{"Bearer t"}, "", errBadCredentials},
		"no space":           {[]string{"Basic"}, "", errBadCredentials},
		"wrong user":         {[]string{"Basic " + b64("root:t")}, "", errBadCredentials},
		"no colon":           {[]string{"Basic " + b64("plugin")}, "", errBadCredentials},
		"empty token":        {[]string{"Basic " + b64("plugin:")}, "", errBadCredentials},
		"space in token":     {[]string{"Basic " + b64("plugin:a b")}, "", errBadCredentials},
		"newline in token":   {[]string{"Basic " + b64("plugin:a\nb")}, "", errBadCredentials},
		"non-ASCII token":    {[]string{"Basic " + b64("plugin:é")}, "", errBadCredentials},
		"unpadded base64":    {[]string{"Basic " + strings.TrimRight(b64("plugin:t"), "=")}, "", errBadCredentials},
		"trailing garbage":   {[]string{"Basic " + b64("plugin:t") + "!"}, "", errBadCredentials},
		"oversized":          {[]string{"Basic " + b64("plugin:"+strings.Repeat("a", maxAuthHeaderLen))}, "", errBadCredentials},
		"user case matters":  {[]string{"Basic " + b64("Plugin:t")}, "", errBadCredentials},
		"leading whitespace": {[]string{" Basic " + b64("plugin:t")}, "", errBadCredentials},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseProxyAuthorization(c.values)
			if got != c.token || err != c.err {
				t.Fatalf("got %q, %v; want %q, %v", got, err, c.token, c.err)
			}
		})
	}
}

func FuzzParseProxyAuthorization(f *testing.F) {
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("plugin:tok")))
	f.Add("Basic cGx1Z2luOg==")
	f.Add("basic   cGx1Z2luOnQ=")
	f.Add("Digest x")
	f.Fuzz(func(t *testing.T, header string) {
		token, err := parseProxyAuthorization([]string{header})
		if err != nil {
			// Only the two fixed sentinels: an error never carries input.
			if token != "" || (err != errNoCredentials && err != errBadCredentials) {
				t.Fatalf("error %v, token %q", err, token)
			}
			return
		}
		if token == "" || strings.ContainsAny(token, " \t\r\n") {
			t.Fatalf("accepted token %q", token)
		}
		// Accepted credentials round-trip through the encoding Go's
		// client uses.
		if again, err := parseProxyAuthorization([]string{basic(ProxyUser, token)}); err != nil || again != token {
			t.Fatalf("round trip: %q, %v", again, err)
		}
	})
}

func TestConnectTarget(t *testing.T) {
	cases := map[string]struct {
		in        string
		canonical string
		status    int
	}{
		"plain":            {"api.bank.example:443", "api.bank.example:443", 0},
		"upper case":       {"API.Bank.Example:8443", "api.bank.example:8443", 0},
		"IDN":              {"bücher.example:443", "xn--bcher-kva.example:443", 0},
		"no port":          {"api.bank.example", "", http.StatusBadRequest},
		"empty port":       {"api.bank.example:", "", http.StatusBadRequest},
		"empty":            {"", "", http.StatusBadRequest},
		"path":             {"api.bank.example:443/x", "", http.StatusBadRequest},
		"absolute URL":     {"https://api.bank.example:443", "", http.StatusBadRequest},
		"userinfo":         {"u@api.bank.example:443", "", http.StatusBadRequest},
		"space":            {"api.bank.example :443", "", http.StatusBadRequest},
		"IPv4":             {"10.0.0.1:443", "", http.StatusForbidden},
		"IPv6":             {"[::1]:443", "", http.StatusForbidden},
		"IPv6 zone":        {"[fe80::1%25eth0]:443", "", http.StatusForbidden},
		"port zero":        {"api.bank.example:0", "", http.StatusForbidden},
		"port too big":     {"api.bank.example:65536", "", http.StatusForbidden},
		"leading zero":     {"api.bank.example:0443", "", http.StatusForbidden},
		"trailing dot":     {"api.bank.example.:443", "", http.StatusForbidden},
		"single label":     {"localhost:443", "", http.StatusForbidden},
		"wildcard":         {"*.bank.example:443", "", http.StatusForbidden},
		"numeric TLD":      {"127.1:443", "", http.StatusForbidden},
		"named port":       {"api.bank.example:https", "", http.StatusForbidden},
		"invalid UTF-8":    {"0.\xff:1", "", http.StatusBadRequest},
		"underscore label": {"a_b.example:443", "", http.StatusForbidden},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			canon, host, port, d := connectTarget(c.in)
			if c.status != 0 {
				if d == nil || d.status != c.status {
					t.Fatalf("got %q, %v; want status %d", canon, d, c.status)
				}
				return
			}
			if d != nil || canon != c.canonical || host+":"+strconv.Itoa(int(port)) != canon {
				t.Fatalf("got %q %q %d %v; want %q", canon, host, port, d, c.canonical)
			}
		})
	}
}

func FuzzConnectTarget(f *testing.F) {
	for _, s := range []string{"api.bank.example:443", "[::1]:443", "a.b:1", "x:y:z", "xn--bcher-kva.example:65535", "127.1:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		canon, host, port, d := connectTarget(in)
		if d != nil {
			if d.status != http.StatusBadRequest && d.status != http.StatusForbidden {
				t.Fatalf("status %d", d.status)
			}
			return
		}
		// What passes is canonical, a fixed point of the domain's
		// canonicalisation, so it compares equal to allow-list entries.
		again, err := plugins.CanonicalEgressHost(canon)
		if err != nil || again != canon {
			t.Fatalf("%q → %q, not canonical: %q %v", in, canon, again, err)
		}
		if port == 0 || host+":"+strconv.Itoa(int(port)) != canon {
			t.Fatalf("%q → %q split as %q %d", in, canon, host, port)
		}
	})
}
