//go:build heavy

package images

import (
	"bytes"
	"context"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestImages pushes every image to an in-process registry, pulls it back by
// digest and checks what a cluster would run: OCI media types, annotations,
// user, entrypoint, the files and their metadata, a binary that is static,
// built with the project's flags and runs, the CA bundle where TLS is used,
// and for plugins the manifest label, equal to manifest.json and to the
// Dockerfile that documents the same image.
func TestImages(t *testing.T) {
	res := sharedBuild(t)
	ctx := context.Background()
	host := newRegistry(t)
	pushed, err := Push(ctx, res, host, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed) != len(Specs()) {
		t.Fatalf("pushed %d images, want %d", len(pushed), len(Specs()))
	}
	src := res.Source
	for i, s := range Specs() {
		t.Run(s.Name, func(t *testing.T) {
			if pushed[i].Name != s.Name || !strings.HasPrefix(pushed[i].Ref, host+"/openfief/"+s.Name+"@sha256:") {
				t.Fatalf("pushed %+v", pushed[i])
			}
			ref, err := name.NewDigest(pushed[i].Ref, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := remote.Index(ref, remote.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if err := validate.Index(idx); err != nil {
				t.Fatalf("the pulled index does not validate: %v", err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || !im.Manifests[0].Platform.Equals(testPlatform()) {
				t.Fatalf("index: media type %s, manifests %+v", im.MediaType, im.Manifests)
			}
			wantAnn := map[string]string{
				AnnotationSource:   SourceURL,
				AnnotationRevision: src.Commit,
				AnnotationVersion:  src.Version,
				AnnotationLicenses: s.Licenses,
				AnnotationCreated:  src.Epoch.Format(time.RFC3339),
				AnnotationTitle:    s.Name,
			}
			checkAnnotations(t, "index", im.Annotations, wantAnn)
			img, err := idx.Image(im.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
				t.Errorf("manifest %s, config %s: want OCI", m.MediaType, m.Config.MediaType)
			}
			for _, l := range m.Layers {
				if l.MediaType != types.OCILayer {
					t.Errorf("layer media type %s", l.MediaType)
				}
			}
			checkAnnotations(t, "manifest", m.Annotations, wantAnn)
			checkConfig(t, s, img, src)
			files := extract(t, img, src.Epoch)
			checkFiles(t, s, files)
			bin := filepath.Join(t.TempDir(), s.Name)
			if err := os.WriteFile(bin, files["/"+s.Name].data, 0o755); err != nil {
				t.Fatal(err)
			}
			checkBinary(t, s, bin)
			if s.ManifestFile != "" {
				checkLabel(t, s, img, src.Root)
			}
			t.Logf("%s %s: %s", s.Name, testPlatform(), MiB(res.Images[i].Images[0].Size))
		})
	}
}

func checkAnnotations(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s annotation %s = %q, want %q", what, k, got[k], v)
		}
	}
}

// checkConfig checks the config: user, entrypoint, platform, times, labels.
func checkConfig(t *testing.T, s Spec, img v1.Image, src Source) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/" + s.Name}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != testPlatform().Architecture {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if !cf.Created.Equal(src.Epoch) {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH %s", cf.Created, src.Epoch)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.History) != len(layers) {
		t.Errorf("%d history entries for %d layers", len(cf.History), len(layers))
	}
	for _, h := range cf.History {
		if !h.Created.Equal(src.Epoch) {
			t.Errorf("history %q created %s", h.CreatedBy, h.Created)
		}
	}
	if cf.Config.Labels[AnnotationSource] != SourceURL || cf.Config.Labels[AnnotationRevision] != src.Commit {
		t.Errorf("labels %v", cf.Config.Labels)
	}
	if _, ok := cf.Config.Labels[plugins.ManifestLabel]; ok != (s.ManifestFile != "") {
		t.Errorf("manifest label present %v for %s", ok, s.Name)
	}
}

// checkFiles checks that the image holds the base and the binary, nothing
// else, with fixed modes.
func checkFiles(t *testing.T, s Spec, files map[string]tarFile) {
	t.Helper()
	want := map[string]int64{"/etc": 0o755, "/etc/passwd": 0o644, "/etc/group": 0o644, "/" + s.Name: 0o755}
	if s.CABundle {
		want["/etc/ssl"], want["/etc/ssl/certs"], want[CABundlePath] = 0o755, 0o755, 0o644
	}
	for name, f := range files {
		mode, ok := want[name]
		if !ok {
			t.Errorf("unexpected file %s", name)
			continue
		}
		if f.hdr.Mode != mode {
			t.Errorf("%s mode %o, want %o", name, f.hdr.Mode, mode)
		}
	}
	for name := range want {
		if _, ok := files[name]; !ok {
			t.Errorf("missing %s", name)
		}
	}
	if !strings.Contains(string(files["/etc/passwd"].data), "nonroot:x:65532:65532:") || !strings.Contains(string(files["/etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("passwd %q, group %q", files["/etc/passwd"].data, files["/etc/group"].data)
	}
	if s.CABundle {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(files[CABundlePath].data) || !bytes.Equal(files[CABundlePath].data, CABundle()) {
			t.Error("the CA bundle does not parse, or is not CABundle()")
		}
		if n := bytes.Count(files[CABundlePath].data, []byte("BEGIN CERTIFICATE")); n < 100 {
			t.Errorf("the CA bundle holds %d roots", n)
		}
	}
}

// checkBinary checks that the binary is static, was built with the
// project's flags from the spec's package, and runs: the core binaries
// print their flags on --help; a plugin, given no environment, names
// itself and the missing egress proxy.
func checkBinary(t *testing.T, s Spec, bin string) {
	t.Helper()
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is not static")
		}
	}
	if ef.Section(".symtab") != nil || ef.Section(".debug_info") != nil {
		t.Error("the binary has a symbol table or DWARF: it was not built with -ldflags=-s -w")
	}
	_ = ef.Close() // read only
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := ModulePath + strings.TrimPrefix(s.Package, "."); info.Path != want {
		t.Errorf("main package %s, want %s", info.Path, want)
	}
	settings := map[string]string{}
	for _, st := range info.Settings {
		settings[st.Key] = st.Value
	}
	// With -trimpath, Go records neither -ldflags nor -buildvcs=false.
	want := map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": testPlatform().Architecture}
	if testPlatform().Architecture == "amd64" {
		want["GOAMD64"] = "v1"
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], v)
		}
	}
	if _, ok := settings["vcs.revision"]; ok {
		t.Error("the binary carries a VCS stamp")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = []string{}
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	switch {
	case s.ManifestFile == "":
		if err != nil || !strings.Contains(string(out), "Usage of") || !strings.Contains(string(out), "-") {
			t.Errorf("%s --help: exit %d, %v:\n%s", s.Name, code, err, out)
		}
		return
	case s.Name == "check-probe":
		// Not a connector: --help is a bad command line (exit 2, usage),
		// and a proxy cell without HTTPS_PROXY is observed as an error.
		if code != 2 || !strings.HasPrefix(string(out), "usage: check-probe") {
			t.Errorf("%s --help: exit %d, %v:\n%s", s.Name, code, err, out)
		}
		cmd := exec.CommandContext(ctx, bin, "run", `{"cells":[{"name":"a","kind":"proxy-no-token","host":"example.com:443"}]}`)
		cmd.Env = []string{}
		out, err := cmd.Output()
		if want := `{"results":[{"name":"a","observed":"error","detail":"no HTTPS_PROXY: the plugin was granted no egress"}]}` + "\n"; err != nil || string(out) != want {
			t.Errorf("%s run: %v:\n%s", s.Name, err, out)
		}
		return
	}
	if code != 1 || !strings.HasPrefix(string(out), s.Name+": ") || !strings.Contains(string(out), "HTTPS_PROXY") {
		t.Errorf("%s without its environment: exit %d, %v:\n%s", s.Name, code, err, out)
	}
}

// checkLabel checks the plugin's manifest label against manifest.json and
// against the Dockerfile kept as documentation (hack/build/plugin-labels.sh).
func checkLabel(t *testing.T, s Spec, img v1.Image, root string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	got := cf.Config.Labels[plugins.ManifestLabel]
	raw, err := os.ReadFile(filepath.Join(root, s.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := jsonCompact(&compact, raw); err != nil {
		t.Fatal(err)
	}
	if got != compact.String() {
		t.Errorf("label differs from %s compacted:\n%s\n%s", s.ManifestFile, got, compact.String())
	}
	if _, err := plugins.ParseManifestLabel(got); err != nil {
		t.Errorf("the operator refuses the label: %v", err)
	}
	df, err := os.ReadFile(filepath.Join(root, filepath.Dir(s.ManifestFile), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	line := "LABEL " + plugins.ManifestLabel + "='" + got + "'"
	if !slices.Contains(strings.Split(string(df), "\n"), line) {
		t.Errorf("%s/Dockerfile does not carry the image's label; run make plugin-labels", filepath.Dir(s.ManifestFile))
	}
}

// jsonCompact is json.Compact, named here so the test reads as the
// computation hack/build/plugin-labels.sh does.
var jsonCompact = json.Compact
