//go:build cluster

package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestTSExampleImage builds the TypeScript example connector's image for
// both platforms from Debian's Node.js (resolved and unpacked by
// NodeRuntime, cached per user; the first run downloads it) and the example
// compiled by TSPluginApp (sdk/ts's npm packages installed by make
// test-deps), and checks its shape: one image per platform, sorted; user
// 65532, Node.js on /app/main.js; the manifest label of the example's manifest.json; the layers in order with
// the runtime's package list; the same bytes when built again. As root it
// then unpacks this machine's image and runs it in a chroot, with no
// environment: the runtime starts; Node.js as the entrypoint runs it trusts
// a server whose CA is in the image's bundle, where Node.js's compiled-in
// roots (the control) do not; and the example loads the SDK and its
// dependencies from /app/node_modules far enough to refuse a start without
// the proxy the operator would set.
func TestTSExampleImage(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads Debian's Node.js and builds two images: not in -short")
	}
	ctx := context.Background()
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Root: root, Commit: strings.Repeat("ab", 20), Epoch: time.Unix(1767225600, 0).UTC(), Version: "v0.0.0-test"}
	// A TLS server on loopback whose certificate only the image's CA bundle
	// trusts (the test's stand-in CA, appended as a plugin test's is).
	bank := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("rates")) }))
	defer bank.Close()
	bankCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bank.Certificate().Raw})
	idx, err := BuildTSExample(ctx, src, []string{"arm64", "amd64"}, bankCA)
	if err != nil {
		t.Fatal(err)
	}
	// Validated as written: in memory, go-containerregistry's layers carry
	// empty annotation maps that their serialized form drops.
	lp, err := layout.Write(t.TempDir(), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	written, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	wm, err := written.IndexManifest()
	if err != nil || len(wm.Manifests) != 1 {
		t.Fatalf("the written layout: %v, %d indexes", err, len(wm.Manifests))
	}
	read, err := written.ImageIndex(wm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(read); err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("index manifests %+v, want amd64 then arm64", im.Manifests)
	}
	raw, err := os.ReadFile(filepath.Join(root, TSExample.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	label, err := ManifestLabel(raw)
	if err != nil {
		t.Fatal(err)
	}
	var host v1.Image
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != User || strings.Join(c.Entrypoint, " ") != "/usr/bin/node --use-openssl-ca /app/main.js" || len(c.Env) != 0 || len(c.Cmd) != 0 {
			t.Errorf("%s: user %q, entrypoint %q, env %q, cmd %q", d.Platform.Architecture, c.User, c.Entrypoint, c.Env, c.Cmd)
		}
		if c.Labels[plugins.ManifestLabel] != label {
			t.Errorf("%s: manifest label %q, want %q", d.Platform.Architecture, c.Labels[plugins.ManifestLabel], label)
		}
		if cf.Architecture != d.Platform.Architecture {
			t.Errorf("config architecture %q in the %s image", cf.Architecture, d.Platform.Architecture)
		}
		files := extract(t, img, src.Epoch)
		for _, want := range []string{"etc/passwd", "etc/ssl/certs/ca-certificates.crt", "usr/bin/node", "lib",
			nodeRuntimeDoc + "/packages.tsv", "app/main.js", "app/connector.js", "app/package.json",
			"app/node_modules/@openfief/sdk/dist/index.js", "app/node_modules/@openfief/sdk/LICENSE",
			"app/node_modules/@connectrpc/connect-node/package.json", "app/node_modules/jose/package.json"} {
			if _, ok := files["/"+want]; !ok {
				t.Errorf("%s: the image has no %s", d.Platform.Architecture, want)
			}
		}
		if f := files["/"+nodeRuntimeDoc+"/packages.tsv"]; f.hdr.Typeflag == tar.TypeSymlink {
			t.Errorf("%s: packages.tsv is a link", d.Platform.Architecture)
		} else if pkgs := string(f.data); !strings.Contains(pkgs, "nodejs\t20.") || !strings.Contains(pkgs, "\t"+d.Platform.Architecture+"\t") {
			t.Errorf("%s: packages.tsv lists no nodejs 20 of its architecture:\n%s", d.Platform.Architecture, pkgs)
		}
		for name := range files {
			if strings.HasPrefix(name, "/app/node_modules/typescript") || strings.HasPrefix(name, "/app/node_modules/prettier") || strings.HasPrefix(name, "/app/node_modules/@types") {
				t.Errorf("%s: a development package in the image: %s", d.Platform.Architecture, name)
				break
			}
		}
		if l := files["/lib"]; l.hdr == nil || l.hdr.Typeflag != tar.TypeSymlink || l.hdr.Linkname != "usr/lib" {
			t.Errorf("%s: /lib is not a link to usr/lib", d.Platform.Architecture)
		}
		if d.Platform.Architecture == HostPlatform().Architecture {
			host = img
		}
	}

	// The same inputs give the same bytes.
	again, err := BuildTSExample(ctx, src, []string{HostPlatform().Architecture}, bankCA)
	if err != nil {
		t.Fatal(err)
	}
	againM, err := again.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	hostDigest, _ := host.Digest()
	if againM.Manifests[0].Digest != hostDigest {
		t.Errorf("built again, the %s image is %s, was %s", HostPlatform().Architecture, againM.Manifests[0].Digest, hostDigest)
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the image is not run in a chroot")
		return
	}
	dir := t.TempDir()
	tr := mutate.Extract(host)
	defer tr.Close()
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdin = tr
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the image: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "chroot", append([]string{"--userspec=65532:65532", dir}, args...)...)
		cmd.Env = []string{}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	out, err := run("/usr/bin/node", "-p", "process.versions.node")
	if err != nil || !strings.HasPrefix(out, "20.") {
		t.Fatalf("node in the image: %v: %s", err, out)
	}
	t.Logf("Node.js %s runs in the image", strings.TrimSpace(out))
	// The entrypoint's Node.js trusts the image's bundle, and so the bank;
	// the control, Node.js's compiled-in roots (--use-bundled-ca), does not.
	get := fmt.Sprintf(`require("https").get(%q, (r) => { console.log("status", r.statusCode); process.exit(0); })`+
		`.on("error", (e) => { console.log(e.code); process.exit(0); })`, bank.URL)
	out, err = run(append(slices.Clone(NodeEntrypoint[:2]), "-e", get)...)
	if err != nil || strings.TrimSpace(out) != "status 200" {
		t.Errorf("an HTTPS request to a server the bundle trusts, as the entrypoint runs Node.js: %v: %s", err, out)
	}
	out, err = run("/usr/bin/node", "--use-bundled-ca", "-e", get)
	if got := strings.TrimSpace(out); err != nil || got == "status 200" || got == "" {
		t.Errorf("the control, Node.js's compiled-in roots: %v: %q, want a certificate error", err, got)
	} else {
		t.Logf("the control, Node.js's compiled-in roots: %s", got)
	}
	out, err = run(NodeEntrypoint...)
	if err == nil || !strings.Contains(out, "fx-rates: egress: no proxy configured") {
		t.Errorf("the example without the operator's environment: %v: %s", err, out)
	}
}
