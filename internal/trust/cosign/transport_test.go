package cosign

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestGuardedTransport(t *testing.T) {
	for name, tc := range map[string]struct {
		url      string
		insecure []string
		allowed  bool
	}{
		"https anywhere":                      {url: "https://ghcr.io/v2/", allowed: true},
		"http to 127.0.0.1":                   {url: "http://127.0.0.1:5000/v2/", allowed: true},
		"http to localhost":                   {url: "http://localhost:5000/v2/", allowed: true},
		"http to [::1]":                       {url: "http://[::1]:5000/v2/", allowed: true},
		"http to a public registry":           {url: "http://ghcr.io/v2/"},
		"http to RFC 1918":                    {url: "http://10.0.0.7:5000/v2/"},
		"http to *.localhost":                 {url: "http://evil.localhost:5000/v2/"},
		"http to a 127.x name":                {url: "http://127.0.0.1.nip.io/v2/"},
		"http to configured":                  {url: "http://registry.lan:5000/v2/", insecure: []string{"registry.lan:5000"}, allowed: true},
		"http to configured host, other port": {url: "http://registry.lan:5001/v2/", insecure: []string{"registry.lan:5000"}},
	} {
		t.Run(name, func(t *testing.T) {
			called := false
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				called = true
				return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
			})
			insecure := map[string]bool{}
			for _, h := range tc.insecure {
				insecure[h] = true
			}
			tr := &guardedTransport{base: base, insecure: insecure, maxBody: 16}
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if (err == nil) != tc.allowed || called != tc.allowed {
				t.Errorf("err = %v, reached the network = %v; want allowed = %v", err, called, tc.allowed)
			}
		})
	}
}

func TestCappedBody(t *testing.T) {
	for name, tc := range map[string]struct {
		body   string
		tooBig bool
	}{
		"under the cap":   {body: "0123456789"},
		"exactly the cap": {body: "0123456789abcdef"},
		"over the cap":    {body: "0123456789abcdefX", tooBig: true},
		"far over":        {body: strings.Repeat("x", 1<<16), tooBig: true},
	} {
		t.Run(name, func(t *testing.T) {
			b := &cappedBody{rc: io.NopCloser(strings.NewReader(tc.body)), left: 16, limit: 16}
			got, err := io.ReadAll(b)
			var tl *bodyTooLargeError
			if errors.As(err, &tl) != tc.tooBig {
				t.Fatalf("err = %v, want too large = %v", err, tc.tooBig)
			}
			if !tc.tooBig && string(got) != tc.body {
				t.Errorf("read %q, want %q", got, tc.body)
			}
			if len(got) > 16 {
				t.Errorf("read %d bytes past a 16-byte cap", len(got))
			}
		})
	}
}
