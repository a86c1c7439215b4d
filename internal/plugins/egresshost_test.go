package plugins

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalEgressHost(t *testing.T) {
	valid := map[string]string{
		"api.nbp.pl":                         "api.nbp.pl:443",
		"api.nbp.pl:443":                     "api.nbp.pl:443",
		"API.NBP.PL":                         "api.nbp.pl:443",
		"gdcdyn.interactivebrokers.com:8443": "gdcdyn.interactivebrokers.com:8443",
		"bücher.example":                     "xn--bcher-kva.example:443",
		"xn--bcher-kva.example:1":            "xn--bcher-kva.example:1",
		"a-b.c-d.example:65535":              "a-b.c-d.example:65535",
		"münchen.de":                         "xn--mnchen-3ya.de:443",
	}
	for in, want := range valid {
		t.Run(in, func(t *testing.T) {
			got, err := CanonicalEgressHost(in)
			if err != nil || got != want {
				t.Fatalf("CanonicalEgressHost(%q) = %q, %v; want %q", in, got, err, want)
			}
		})
	}

	invalid := map[string]string{
		"empty":             "",
		"single label":      "core",
		"single label port": "core:443",
		"trailing dot":      "api.nbp.pl.",
		"wildcard":          "*.nbp.pl",
		"ipv4":              "10.0.0.1",
		"ipv4 with port":    "169.254.169.254:80",
		"ipv4 shorthand":    "127.1",
		"ipv6":              "::1",
		"ipv6 bracketed":    "[::1]:443",
		"port zero":         "api.nbp.pl:0",
		"port too large":    "api.nbp.pl:65536",
		"port leading zero": "api.nbp.pl:0443",
		"port sign":         "api.nbp.pl:+443",
		"empty port":        "api.nbp.pl:",
		"two ports":         "api.nbp.pl:443:443",
		"underscore":        "my_host.example",
		"space":             "api .nbp.pl",
		"empty label":       "api..nbp.pl",
		"leading hyphen":    "-api.nbp.pl",
		"label too long":    strings.Repeat("a", 64) + ".example",
		"too long":          strings.Repeat("a.", 160) + "example",
		"scheme":            "https://api.nbp.pl",
		"path":              "api.nbp.pl/x",
		"userinfo":          "user@api.nbp.pl",
		"empty host":        ":443",
		// Names only a cluster's or a local resolver answers.
		"cluster service":     "openfief-core.openfief.svc.cluster.local",
		"cluster short form":  "openfief-core.openfief.svc",
		"cluster local":       "api.bank.example.cluster.local",
		"mdns":                "printer.local:631",
		"cloud metadata name": "metadata.google.internal:80",
		"localhost subdomain": "app.localhost",
		"home network":        "router.home.arpa",
		"reverse zone":        "1.0.0.127.in-addr.arpa",
		"localdomain":         "nas.localdomain",
		"upper case svc":      "X.NS.SVC",
	}
	for name, in := range invalid {
		t.Run(name, func(t *testing.T) {
			got, err := CanonicalEgressHost(in)
			if !errors.Is(err, ErrInvalidEgressHost) {
				t.Fatalf("CanonicalEgressHost(%q) = %q, %v; want ErrInvalidEgressHost", in, got, err)
			}
		})
	}
}

func FuzzCanonicalEgressHost(f *testing.F) {
	for _, s := range []string{"api.nbp.pl", "API.nbp.pl:8443", "bücher.example", "127.1", "*.x.y", "a.b.", "[::1]:1", "xn--a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canon, err := CanonicalEgressHost(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidEgressHost) {
				t.Fatalf("error %v does not wrap ErrInvalidEgressHost", err)
			}
			return
		}
		// Canonical forms are fixed points: the proxy canonicalises CONNECT
		// targets and compares them with allow-list entries byte for byte.
		again, err := CanonicalEgressHost(canon)
		if err != nil || again != canon {
			t.Fatalf("canonical %q of %q is not a fixed point: %q, %v", canon, s, again, err)
		}
		host, port, ok := strings.Cut(canon, ":")
		if !ok || port == "" || strings.Count(host, ".") < 1 || host != strings.ToLower(host) {
			t.Fatalf("canonical %q is not lower-case host:port with two labels", canon)
		}
		for i := 0; i < len(host); i++ {
			if host[i] >= 0x80 {
				t.Fatalf("canonical %q is not ASCII", canon)
			}
		}
	})
}

func TestInClusterDomain(t *testing.T) {
	for name, tc := range map[string]struct {
		host, domain string
		want         bool
	}{
		"service under custom domain": {"api.ns.svc.k8s.example.com", "k8s.example.com", true},
		"the domain itself":           {"k8s.example.com", "k8s.example.com.", true},
		"domain given in upper case":  {"a.k8s.example.com", "K8S.Example.COM", true},
		"suffix is not a label":       {"apik8s.example.com", "k8s.example.com", false},
		"other name":                  {"api.bank.example", "k8s.example.com", false},
		"no cluster domain":           {"api.bank.example", "", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := InClusterDomain(tc.host, tc.domain); got != tc.want {
				t.Fatalf("InClusterDomain(%q, %q) = %v, want %v", tc.host, tc.domain, got, tc.want)
			}
		})
	}
}
