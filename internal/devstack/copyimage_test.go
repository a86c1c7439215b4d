package devstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
)

// serveRegistry serves an in-memory registry on loopback, with the
// Referrers API or without it (cosign then keeps its bundles under the
// sha256-<hex> tag), and returns its host:port.
func serveRegistry(t *testing.T, referrers bool) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrers), registry.Logger(discardLog())))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// checkAs runs the operator's check of ref with signers (a signers.json)
// as the owner's.
func checkAs(t *testing.T, signers []byte, ref plugins.ImageRef) trust.Verification {
	t.Helper()
	policy, err := trust.NewPolicy(signers)
	if err != nil {
		t.Fatal(err)
	}
	images, err := trust.NewImageVerifier(policy)
	if err != nil {
		t.Fatal(err)
	}
	return trust.NewPolicyVerifier(images, policy).Check(context.Background(), ref, nil)
}

// TestCopyImageKeepsSignature: a vendor's image signed in the vendor's
// registry, with or without the Referrers API, copied by CopyImage into a
// registry like the stack's, verifies there for the vendor's key as
// SignedByTrustedSigner under the name it is given; the image alone, copied
// without its referrers, is Unsigned there.
func TestCopyImageKeepsSignature(t *testing.T) {
	for name, referrers := range map[string]bool{"referrers API": true, "tag fallback": false} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			vendorReg, devReg := serveRegistry(t, referrers), serveRegistry(t, true)
			vendor, err := ocisign.NewKeySigner()
			if err != nil {
				t.Fatal(err)
			}
			signers, err := vendor.SignersJSON("acme")
			if err != nil {
				t.Fatal(err)
			}
			m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.acme.example"}}
			img, err := ocisign.PluginImage(m, map[string][]byte{"plugin": []byte("#!/bin/false\n")})
			if err != nil {
				t.Fatal(err)
			}
			src, err := ocisign.Push(ctx, vendorReg, "acme/fx", img)
			if err != nil {
				t.Fatal(err)
			}
			if err := vendor.Sign(ctx, src); err != nil {
				t.Fatal(err)
			}
			if v := checkAs(t, signers, src); v.Reason != v1alpha1.ReasonSignedByTrustedSigner {
				t.Fatalf("the source: %s: %s", v.Reason, v.Message)
			}

			// The image alone: no signature comes with it.
			plain, err := ocisign.Push(ctx, devReg, "plain/fx", img)
			if err != nil {
				t.Fatal(err)
			}
			if v := checkAs(t, signers, plain); v.Reason != v1alpha1.ReasonUnsigned {
				t.Errorf("a copy without referrers: %s: %s; want Unsigned", v.Reason, v.Message)
			}

			// With its referrers, named under another address of the same
			// registry (here the same one: the in-cluster mode's bridge
			// name is another listener of one server).
			res, err := CopyImage(ctx, src, devReg, devReg, "vendors/acme-fx")
			if err != nil {
				t.Fatal(err)
			}
			if want := devReg + "/vendors/acme-fx@" + src.Digest(); res.Image.String() != want {
				t.Errorf("copy named %s, want %s", res.Image, want)
			}
			if len(res.Referrers) != 1 || res.Skipped != 0 {
				t.Errorf("copied referrers %v, skipped %d; want the one signature", res.Referrers, res.Skipped)
			}
			if v := checkAs(t, signers, res.Image); v.Reason != v1alpha1.ReasonSignedByTrustedSigner || v.Signer != "acme" {
				t.Errorf("the copy: %s by %q: %s", v.Reason, v.Signer, v.Message)
			}
		})
	}
}

// TestCopyImageRefusesPlainRedirect: a source registry that is not on
// loopback may not send the copy to plain HTTP.
func TestCopyImageRefusesPlainRedirect(t *testing.T) {
	tr := &copyTransport{base: http.DefaultTransport, origin: "registry.acme.example"}
	first, _ := http.NewRequest(http.MethodGet, "https://registry.acme.example/v2/acme/fx/blobs/sha256:00", nil)
	for target, want := range map[string]string{
		"http://cdn.acme.example/blob":  "plain http",
		"https://127.0.0.1/blob":        "not a public address",
		"https://10.1.2.3/blob":         "not a public address",
		"https://169.254.169.254/blob":  "not a public address",
		"https://metadata.localhost/me": "not a public address",
	} {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		req.Response = &http.Response{Request: first}
		_, err := tr.RoundTrip(req)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("redirect to %s: %v; want %q", target, err, want)
		}
	}
}
