//go:build heavy

package release

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/mod/modfile"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// TestMake makes a release for this machine's platform into an in-process
// registry, signed with a fresh key, and checks what a user gets: the
// catalog pins the plugins to the key, the operator's binary holds that
// catalog, the plugins verify as Verified against it, the files are
// consistent, and a second release of the same tree has the same digests.
func TestMake(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	signer, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := signer.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	publisher := plugins.Signer{Name: "openfief-release-test", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: pub}}
	opts := Options{
		Root: cloneHead(t, "a", "openfief"), Version: "v0.9.0-test.1", Registry: host + "/rel", Signer: signer, Publisher: publisher,
		BuilderID: images.LocalBuilderID, Command: "make release VERSION=v0.9.0-test.1",
		Out: filepath.Join(t.TempDir(), "first"), Platforms: []v1.Platform{images.HostPlatform()},
		Progress: testWriter{t},
	}
	res, err := Make(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}

	want := []string{"ibkr-flex", "nbp-fx", "check-probe", "openfief-core", "egress-proxy", "operator"}
	for _, n := range want {
		if ref, ok := res.Images[n]; !ok || !strings.HasPrefix(ref.String(), host+"/rel/openfief/"+n+"@sha256:") {
			t.Errorf("image %s: %q", n, ref)
		}
	}
	wantFiles := []string{CatalogFile, CatalogSignatureFile, ChecksumsFile, ChecksumsSignatureFile, ImagesFile, InstallFile, NotesFile, PublisherKeyFile, KustomizationFile, CLIFile(images.HostPlatform())}
	slices.Sort(wantFiles)
	if !slices.Equal(res.Files, wantFiles) {
		t.Errorf("files %v, want %v", res.Files, wantFiles)
	}
	checkSums(t, opts.Out)

	cat, err := plugins.ParseCatalog(res.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range cat.Entries() {
		names = append(names, e.Name)
		if e.Image != res.Images[e.Name] || e.Publisher.Identity.PublicKeyPEM != pub || e.Publisher.Name != publisher.Name {
			t.Errorf("catalog entry %s: %+v", e.Name, e)
		}
	}
	if !slices.Equal(names, CatalogPlugins) {
		t.Errorf("catalog lists %v, want %v", names, CatalogPlugins)
	}
	if onDisk, _ := os.ReadFile(filepath.Join(opts.Out, CatalogFile)); !bytes.Equal(onDisk, res.Catalog) {
		t.Error("plugins.json on disk differs from the catalog linked into the operator")
	}

	// The operator's binary carries the catalog, linked in.
	bin := fileInImage(t, res.Images["operator"], "operator")
	if !bytes.Contains(bin, []byte(catalog.Encode(res.Catalog))) {
		t.Error("the operator's binary does not hold the release's catalog")
	}
	if bytes.Contains(fileInImage(t, res.Images["egress-proxy"], "egress-proxy"), []byte(catalog.Encode(res.Catalog))) {
		t.Error("the egress proxy's binary holds the catalog too")
	}

	// The catalog file is signed by the release's publisher, for exactly
	// its bytes (the CLI's --catalog-file checks it so).
	sig, _ := os.ReadFile(filepath.Join(opts.Out, CatalogSignatureFile))
	if id, pred, err := cosign.VerifyFile(sig, res.Catalog, plugins.CatalogPredicateType, cosign.WithPublicKeys([]string{pub})); err != nil || id.PublicKeyPEM != pub || !bytes.Contains(pred, []byte(`"version":"`+opts.Version+`"`)) {
		t.Errorf("%s: %+v, %s, %v; want the publisher's signature naming %s", CatalogSignatureFile, id, pred, err, opts.Version)
	}

	// SHA256SUMS, which covers every other file, is signed too.
	sums, _ := os.ReadFile(filepath.Join(opts.Out, ChecksumsFile))
	sumsSig, _ := os.ReadFile(filepath.Join(opts.Out, ChecksumsSignatureFile))
	if _, _, err := cosign.VerifyFile(sumsSig, sums, ChecksumsPredicateType, cosign.WithPublicKeys([]string{pub})); err != nil {
		t.Errorf("%s: %v", ChecksumsSignatureFile, err)
	}

	// The CLI's binary carries the catalog, the version and the check
	// probe, linked in like the operator's catalog.
	cliBin, _ := os.ReadFile(filepath.Join(opts.Out, CLIFile(images.HostPlatform())))
	for _, s := range []string{catalog.Encode(res.Catalog), res.Images["check-probe"].String()} {
		if !bytes.Contains(cliBin, []byte(s)) {
			t.Errorf("the CLI's binary does not hold %.60s", s)
		}
	}

	// As the operator of this release decides: nbp-fx is Verified, by the
	// release's publisher; the operator image is signed by it too, but no
	// entry pins it.
	policy, err := plugins.NewTrustPolicy(cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := trust.NewImageVerifier(policy, cosign.WithInsecureRegistries(host))
	if err != nil {
		t.Fatal(err)
	}
	check := trust.NewPolicyVerifier(v, policy)
	for name, reason := range map[string]string{"nbp-fx": v1alpha1.ReasonVerified, "ibkr-flex": v1alpha1.ReasonVerified, "operator": v1alpha1.ReasonSignedByTrustedSigner} {
		got := check.Check(ctx, res.Images[name], nil)
		if !got.Verified() || got.Reason != reason || got.Signer != publisher.Name {
			t.Errorf("%s: %+v, want %s by %s", name, got, reason, publisher.Name)
		}
	}

	// The release directory is an overlay: it renders the pinned images and
	// the ConfigMap naming the check probe.
	objs, err := deploy.Render(opts.Out)
	if err != nil {
		t.Fatal(err)
	}
	var cm map[string]any
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && u.GetName() == deploy.ReleaseConfigMap {
			cm, _ = u.Object["data"].(map[string]any)
		}
		if got := u.GetLabels()["app.kubernetes.io/version"]; got != opts.Version && u.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s %s has version label %q", u.GetKind(), u.GetName(), got)
		}
	}
	if cm == nil {
		t.Fatal("no ConfigMap " + deploy.ReleaseConfigMap)
	}
	if len(cm) != 1 {
		t.Errorf("the ConfigMap holds %v, want the check probe only (nothing reads a catalog from it)", cm)
	}
	if cm[deploy.ReleaseKeyCheckProbe] != res.Images["check-probe"].String() {
		t.Errorf("the ConfigMap names check probe %v", cm[deploy.ReleaseKeyCheckProbe])
	}
	imgs, err := overlay.RenderedImages(opts.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if !slices.ContainsFunc(want, func(n string) bool { return res.Images[n].String() == img }) {
			t.Errorf("install.yaml runs %s, not an image of the release", img)
		}
	}
	notes, _ := os.ReadFile(filepath.Join(opts.Out, NotesFile))
	for _, n := range want {
		if !bytes.Contains(notes, []byte(res.Images[n].String())) {
			t.Errorf("the release notes do not name %s", res.Images[n])
		}
	}

	// What RELEASE.md tells a user to run, run as they would.
	runReleaseNotes(t, opts.Out, res)

	// Every index has a signed SBOM and provenance, listed in images.json
	// and RELEASE.md; one plugin's and one platform image's verify.
	imagesFile, _ := os.ReadFile(filepath.Join(opts.Out, ImagesFile))
	for _, n := range want {
		a := res.Attestations[n]
		if a.SBOM == "" || a.Provenance == "" || !bytes.Contains(imagesFile, []byte(a.SBOM)) || !bytes.Contains(imagesFile, []byte(a.Provenance)) ||
			!bytes.Contains(notes, []byte(a.SBOM)) || !bytes.Contains(notes, []byte(a.Provenance)) {
			t.Errorf("%s: attestations %+v not listed in %s and %s", n, a, ImagesFile, NotesFile)
		}
	}
	av, err := cosign.NewVerifier(cosign.WithPublicKeys([]string{pub}))
	if err != nil {
		t.Fatal(err)
	}
	ggcr := "pkg:golang/github.com/google/go-containerregistry@" + goModVersion(t, opts.Root, "github.com/google/go-containerregistry")
	for _, n := range []string{"nbp-fx", "operator"} {
		ref := res.Images[n]
		sboms, rep, err := av.VerifyAttestations(ctx, ref, plugins.SBOMPredicateType)
		if err != nil || len(sboms) != 1 || sboms[0].Referrer != res.Attestations[n].SBOM || sboms[0].Signer.PublicKeyPEM != pub {
			t.Fatalf("%s: SBOMs %+v, %+v: %v", n, sboms, rep, err)
		}
		if !bytes.Contains(sboms[0].Predicate, []byte(`"bomFormat":"CycloneDX"`)) || !bytes.Contains(sboms[0].Predicate, []byte(`"version":"`+opts.Version+`"`)) {
			t.Errorf("%s: the SBOM does not name the release's version", n)
		}
		if n == "operator" && !bytes.Contains(sboms[0].Predicate, []byte(`"purl":"`+ggcr+`"`)) {
			t.Errorf("the operator's SBOM lists no %s", ggcr)
		}
		provs, rep, err := av.VerifyAttestations(ctx, ref, plugins.ProvenancePredicateType)
		if err != nil || len(provs) != 1 || provs[0].Referrer != res.Attestations[n].Provenance {
			t.Fatalf("%s: provenance %+v, %+v: %v", n, provs, rep, err)
		}
		want := []string{res.Commit, opts.Command, opts.BuilderID, `"image":"` + n + `"`}
		if n == "operator" {
			// The catalog linked into the operator, by its hash.
			sum := sha256.Sum256([]byte(catalog.Encode(res.Catalog)))
			want = append(want, `"linkStrings":{"`+catalog.Symbol+`":"sha256:`+hex.EncodeToString(sum[:])+`"}`)
		}
		for _, s := range want {
			if !bytes.Contains(provs[0].Predicate, []byte(s)) {
				t.Errorf("%s: the provenance does not hold %s", n, s)
			}
		}
	}

	// Again, from another clone of the same commit in another directory,
	// into another directory: the same digests and the same files but for
	// those listing the attestations' referrers (a signature is randomised;
	// none is part of an image's digest).
	again := opts
	again.Root = cloneHead(t, "b", "src", "elsewhere")
	again.Out = filepath.Join(t.TempDir(), "second")
	res2, err := Make(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		if res.Images[n] != res2.Images[n] {
			t.Errorf("%s: %s, then %s", n, res.Images[n], res2.Images[n])
		}
	}
	for _, f := range res.Files {
		if f == ImagesFile || f == NotesFile || f == ChecksumsFile || f == CatalogSignatureFile || f == ChecksumsSignatureFile {
			continue
		}
		a, _ := os.ReadFile(filepath.Join(opts.Out, f))
		b, _ := os.ReadFile(filepath.Join(again.Out, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the two releases", f)
		}
	}
}

func checkSums(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(raw)) {
		sum, file, ok := strings.Cut(strings.TrimSpace(line), "  ")
		data, err := os.ReadFile(filepath.Join(dir, file))
		if !ok || err != nil {
			t.Fatalf("%s: line %q: %v", ChecksumsFile, line, err)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: %s does not match", ChecksumsFile, file)
		}
		n++
	}
	// Every file but SHA256SUMS and its signature.
	if entries, _ := os.ReadDir(dir); n != len(entries)-2 {
		t.Errorf("%s lists %d files of %d", ChecksumsFile, n, len(entries)-2)
	}
}

// fileInImage reads /<file> from the host platform's image of ref.
func fileInImage(t *testing.T, ref plugins.ImageRef, file string) []byte {
	t.Helper()
	d, err := name.NewDigest(ref.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(d)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no /%s", ref, file)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(hdr.Name, "./") == file {
			data, err := io.ReadAll(io.LimitReader(tr, 256<<20))
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// cloneHead clones the commit the repository is at into a new folder,
// path under a temporary directory, and returns the clone's root: a
// release is of a commit, whatever the working tree holds besides.
func cloneHead(t *testing.T, path ...string) string {
	t.Helper()
	dir := filepath.Join(append([]string{t.TempDir()}, path...)...)
	cmd := exec.Command("git", "clone", "--quiet", testutil.MustRepoRoot(), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return dir
}

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, root, module string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	t.Fatalf("go.mod requires no %s", module)
	return ""
}

func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
