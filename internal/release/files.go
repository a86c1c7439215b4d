package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// The files of a release, in Out.
const (
	// InstallFile holds every object of the platform, images pinned by
	// digest, in the order kustomize renders them.
	InstallFile = "install.yaml"
	// KustomizationFile names InstallFile, so that the release directory is
	// an overlay: `openfief platform install --overlay DIR` and `kubectl
	// apply --server-side -k DIR` take it.
	KustomizationFile = "kustomization.yaml"
	// CatalogFile is the catalog linked into the operator and the CLI.
	CatalogFile = "plugins.json"
	// CatalogSignatureFile is CatalogFile's Sigstore bundle, signed by the
	// release's publisher (SignCatalog): `openfief ... --catalog-file
	// plugins.json` reads it from beside the file and refuses the file
	// unless it verifies.
	CatalogSignatureFile = CatalogFile + SignatureSuffix
	// SignatureSuffix names a file's Sigstore bundle beside it, as cosign's
	// --bundle examples do.
	SignatureSuffix = plugins.CatalogSignatureSuffix
	// ChecksumsSignatureFile is ChecksumsFile's Sigstore bundle, signed by
	// the release's publisher (ChecksumsPredicateType).
	ChecksumsSignatureFile = ChecksumsFile + SignatureSuffix
	// ImagesFile lists every image of the release by name.
	ImagesFile = "images.json"
	// NotesFile is the release notes.
	NotesFile = "RELEASE.md"
	// PublisherKeyFile is the publisher's public key, when it is a key.
	PublisherKeyFile = "publisher.pub"
	// ChecksumsFile holds the SHA-256 of every other file, as sha256sum
	// writes them.
	ChecksumsFile = "SHA256SUMS"
)

// writeFiles writes the release's files into o.Out and returns their
// names, sorted.
func writeFiles(ctx context.Context, o Options, src images.Source, res *Result) ([]string, error) {
	install, err := renderInstall(o, res)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		InstallFile:          install,
		KustomizationFile:    []byte(kustomization(res.Version)),
		CatalogFile:          res.Catalog,
		CatalogSignatureFile: res.CatalogSignature,
		NotesFile:            []byte(notes(o, src, res)),
	}
	for name, bin := range res.CLI {
		files[name] = bin
	}
	if files[ImagesFile], err = imagesJSON(res); err != nil {
		return nil, err
	}
	if pem := o.Publisher.Identity.PublicKeyPEM; pem != "" {
		files[PublisherKeyFile] = []byte(pem)
	}
	names := slices.Sorted(maps.Keys(files))
	var sums strings.Builder
	for _, n := range names {
		sum := sha256.Sum256(files[n])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	files[ChecksumsFile] = []byte(sums.String())
	if files[ChecksumsSignatureFile], err = signFile(ctx, o.Signer, files[ChecksumsFile], ChecksumsPredicateType, res.Version); err != nil {
		return nil, fmt.Errorf("sign %s: %w", ChecksumsFile, err)
	}
	names = append(names, ChecksumsFile, ChecksumsSignatureFile)
	slices.Sort(names)
	for _, n := range names {
		mode := os.FileMode(0o644)
		if _, ok := res.CLI[n]; ok {
			mode = 0o755
		}
		if err := write(o.Out, n, files[n], mode); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Progress, "wrote %s: %s\n", o.Out, strings.Join(names, ", "))
	return names, nil
}

// renderInstall writes the platform overlay of the release into a
// temporary directory, as `make release-overlay` writes one, and renders
// it into one YAML stream.
func renderInstall(o Options, res *Result) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "openfief-release-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	refs := map[string]plugins.ImageRef{}
	for _, name := range append(append([]string(nil), platformImages...), overlay.CheckProbe) {
		refs[name] = res.Images[name]
	}
	if err := overlay.WritePlatform(tmp, filepath.Join(o.Root, "deploy"), overlay.Platform{
		Refs: refs, Version: res.Version,
	}); err != nil {
		return nil, err
	}
	objs, err := deploy.Render(tmp)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# OpenFief %s: every object of the platform, images pinned by digest.\n", res.Version)
	b.WriteString("# Install: openfief platform install --overlay <the release directory> (docs/operator.md)\n")
	for _, u := range objs {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		b.WriteString("---\n")
		b.Write(raw)
	}
	return b.Bytes(), nil
}

// CLIFile names the release's openfief binary for platform p.
func CLIFile(p v1.Platform) string {
	name := "openfief-" + p.OS + "-" + p.Architecture
	if p.Variant != "" {
		name += "-" + p.Variant
	}
	if p.OS == "windows" {
		name += ".exe"
	}
	return name
}

func kustomization(version string) string {
	return "# OpenFief " + version + ": the release as an overlay (openfief platform install --overlay DIR).\n" +
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + InstallFile + "\n"
}

// imageEntry is one line of images.json: the index and the referrer
// manifests of its signed SBOM and provenance.
type imageEntry struct {
	Name       string `json:"name"`
	Ref        string `json:"ref"`
	SBOM       string `json:"sbom,omitempty"`
	Provenance string `json:"provenance,omitempty"`
}

func imagesJSON(res *Result) ([]byte, error) {
	var list []imageEntry
	for _, name := range sortedNames(res.Images) {
		a := res.Attestations[name]
		list = append(list, imageEntry{Name: name, Ref: res.Images[name].String(), SBOM: a.SBOM, Provenance: a.Provenance})
	}
	raw, err := json.MarshalIndent(map[string]any{"images": list}, "", "  ")
	return append(raw, '\n'), err
}

func sortedNames(refs map[string]plugins.ImageRef) []string {
	return slices.Sorted(maps.Keys(refs))
}

// notes are the release notes: what was built from what, every digest, and
// how to check and install it. The catalog section says what D-43 and D-44
// make of it.
func notes(o Options, src images.Source, res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# OpenFief %s\n\nBuilt from commit %s of %s.\n\n", res.Version, src.Commit, images.SourceURL)
	b.WriteString("## Images\n\nEvery image is an index for ")
	platforms := o.Platforms
	if platforms == nil {
		platforms = images.Platforms()
	}
	var ps []string
	for _, p := range platforms {
		ps = append(ps, p.String())
	}
	fmt.Fprintf(&b, "%s, signed by %s.\n\n| image | reference |\n|---|---|\n", strings.Join(ps, " and "), publisherText(o.Publisher))
	for _, name := range sortedNames(res.Images) {
		fmt.Fprintf(&b, "| %s | `%s` |\n", name, res.Images[name])
	}
	b.WriteString("\n## Attestations\n\nEvery index has a CycloneDX SBOM of its binary's Go build information and SLSA v1\n" +
		"provenance, each an in-toto statement about the index's digest signed by the publisher and\n" +
		"attached as an OCI referrer (docs/images.md, Attestations). Their referrer manifests:\n\n" +
		"| image | SBOM | provenance |\n|---|---|---|\n")
	for _, name := range sortedNames(res.Images) {
		a := res.Attestations[name]
		fmt.Fprintf(&b, "| %s | `%s` | `%s` |\n", name, a.SBOM, a.Provenance)
	}
	// Verified as D-43 and D-44 define it, said in words for the reader.
	b.WriteString("\n## Catalog\n\nThe operator and the `openfief` binaries of this release hold `" + CatalogFile + "`, which makes these plugins Verified\n(their digests are pinned in it, and its publisher signed them): ")
	b.WriteString(strings.Join(CatalogPlugins, ", ") + ". `" + CatalogSignatureFile + "` is the publisher's signature of the file, which\n`openfief ... --catalog-file " + CatalogFile + "` requires. Install one by name with this release's `openfief`:\n\n```sh\nopenfief catalog list\nopenfief plugin install fx --catalog nbp-fx\n```\n")
	var clis []string
	for _, name := range slices.Sorted(maps.Keys(res.CLI)) {
		clis = append(clis, "`"+name+"`")
	}
	b.WriteString("\n## Install\n\nThe CLI of this release, with its catalog and its check probe built in: " + strings.Join(clis, ", ") + ".\n\n```sh\nsha256sum -c " + ChecksumsFile + "\nopenfief platform install --overlay .\n```\n\n`" + ChecksumsSignatureFile + "` is the publisher's signature of `" + ChecksumsFile + "` (predicate type `" + ChecksumsPredicateType + "`): check it before you trust the checksums (below).\n")
	b.WriteString("\n## Verify\n\n")
	id := o.Publisher.Identity
	var who string
	if id.PublicKeyPEM != "" {
		who = "--key " + PublisherKeyFile + " --insecure-ignore-tlog=true"
		fmt.Fprintf(&b, "With cosign (v3) and the publisher's key, `%s`, in this directory:\n\n", PublisherKeyFile)
	} else {
		who = "--certificate-identity " + id.Subject + " --certificate-oidc-issuer " + id.Issuer
		b.WriteString("With cosign (v3), in this directory:\n\n")
	}
	op := res.Images["operator"]
	fmt.Fprintf(&b, "```sh\n"+
		"cosign verify-blob-attestation %[1]s --bundle %[2]s --type %[3]s %[4]s\n"+
		"sha256sum -c %[4]s\n"+
		"cosign verify-blob-attestation %[1]s --bundle %[5]s --type %[6]s %[7]s\n"+
		"cosign verify-attestation %[1]s --type %[8]s %[9]s\n"+
		"cosign verify-attestation %[1]s --type cyclonedx %[9]s\n"+
		"cosign verify-attestation %[1]s --type slsaprovenance1 %[9]s\n"+
		"```\n",
		who, ChecksumsSignatureFile, ChecksumsPredicateType, ChecksumsFile,
		CatalogSignatureFile, plugins.CatalogPredicateType, CatalogFile, plugins.SignPredicateType, op)
	b.WriteString("\nThe first `verify-attestation` checks the image's signature: a statement of cosign's signature type,\n`" +
		plugins.SignPredicateType + "`, which is what `cosign sign` writes and the only kind the operator\n" +
		"accepts. `cosign verify` alone is not enough: it counts every Sigstore bundle the key or identity signed as a\n" +
		"signature, so an image that carries only an SBOM or provenance attestation passes it. If you use it, check that\n" +
		"its JSON output's `critical.type` is `" + plugins.SignPredicateType + "`.\n")
	b.WriteString("\nWith OpenFief's own verifier, as the operator checks a plugin: this release's `openfief` (`openfief-<os>-<arch>`\n" +
		"above), with this release's catalog file, whose signature it checks before using it")
	if id.PublicKeyPEM != "" {
		b.WriteString(" (another `openfief` refuses the\nfile unless its own catalog names this publisher's key)")
	} else {
		b.WriteString(" (any `openfief` takes the file,\nsince OpenFief's CI is always trusted to sign a catalog)")
	}
	b.WriteString(":\n\n```sh\nopenfief plugin verify " + res.Images["nbp-fx"].String() + " --catalog-file " + CatalogFile + "\n```\n\n" +
		"It prints, among its lines, the result, Verified (the catalog pins this digest and its publisher signed it), and the\n" +
		"signer, followed by the SBOM and provenance listed above:\n\n" +
		"```text\nResult:     Verified\nSigner:     " + o.Publisher.Name + "\n```\n")
	return b.String()
}

func publisherText(p plugins.Signer) string {
	if p.Identity.PublicKeyPEM != "" {
		return fmt.Sprintf("%s (a key, %s)", p.Name, PublisherKeyFile)
	}
	return fmt.Sprintf("%s (keyless: %s, issuer %s)", p.Name, p.Identity.Subject, p.Identity.Issuer)
}
