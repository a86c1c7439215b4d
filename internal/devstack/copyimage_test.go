package devstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/cli"
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

// TestCopyCommand: `openfief dev copy` reads the registry's two addresses
// from the state directory's env file, copies the vendor's image with its
// signature and prints the copy's name alone on standard output.
func TestCopyCommand(t *testing.T) {
	ctx := t.Context()
	vendorReg, devReg := serveRegistry(t, true), serveRegistry(t, true)
	vendor, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	img, err := ocisign.PluginImage(plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}, map[string][]byte{"plugin": []byte("x")})
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
	dir := t.TempDir()
	if err := (&Stack{RegistryHost: devReg, Images: map[string]plugins.ImageRef{}}).writeEnv(dir); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	code := cli.Main(ctx, []string{"dev", "copy", src.String(), "vendors/acme-fx", "--state-dir", dir},
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, NewCommand)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	want := devReg + "/vendors/acme-fx@" + src.Digest()
	if out.String() != want+"\n" {
		t.Errorf("standard output %q, want %q", out.String(), want+"\n")
	}
	if !strings.Contains(errOut.String(), "with 1 referrer(s)") {
		t.Errorf("standard error: %s", errOut.String())
	}
	signers, err := vendor.SignersJSON("acme")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := plugins.ParseImageRef(want)
	if err != nil {
		t.Fatal(err)
	}
	if v := checkAs(t, signers, ref); v.Reason != v1alpha1.ReasonSignedByTrustedSigner {
		t.Errorf("the copy: %s: %s", v.Reason, v.Message)
	}

	// No env file: exit 1, naming the state directory.
	code = cli.Main(ctx, []string{"dev", "copy", src.String(), "vendors/acme-fx", "--state-dir", t.TempDir()},
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, NewCommand)
	if code != cli.ExitFailure || !strings.Contains(errOut.String(), "--state-dir") {
		t.Errorf("without an env file: exit %d\n%s", code, errOut.String())
	}
}

// FuzzParseEnv: any env file parses without panicking, and the exports
// writeEnv writes read back as written.
func FuzzParseEnv(f *testing.F) {
	f.Add([]byte("export OPENFIEF_REGISTRY=\"127.0.0.1:5000\"\nexport X=\"a\\nb\"\n# comment\nexport Y=unquoted\n"))
	f.Add([]byte("export =\"\"\nexport"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		vars, err := parseEnv(raw)
		if err != nil {
			return
		}
		for k, v := range vars {
			line := "export " + k + "=" + strconv.Quote(v) + "\n"
			again, err := parseEnv([]byte(line))
			if err != nil || again[k] != v {
				t.Errorf("%q read back as %q (%v)", line, again[k], err)
			}
		}
	})
}
