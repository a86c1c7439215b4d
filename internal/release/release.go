package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/mod/semver"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// Signer signs an in-toto statement into a Sigstore bundle: a key
// (ocisign.KeySigner) or, in the release workflow, a keyless identity.
type Signer interface {
	Bundle(ctx context.Context, statement []byte) ([]byte, error)
}

// Options says what to release and where.
type Options struct {
	// Root is the repository's root.
	Root string
	// Version is the release's version, vMAJOR.MINOR.PATCH with an optional
	// pre-release: the images' version annotation and the platform's
	// version label.
	Version string
	// Registry is the prefix the images go under:
	// <Registry>/openfief/<name>.
	Registry string
	// Insecure pushes over plain HTTP (loopback registries always are).
	Insecure bool
	// Signer signs every image index and its attestations.
	Signer Signer
	// BuilderID is the builder the images' SLSA provenance names
	// (runDetails.builder.id): CI's workflow URI, or images.LocalBuilderID
	// for a release made on a developer's machine; required.
	BuilderID string
	// Command is the exact command that made the release, recorded in the
	// provenance (`make release VERSION=v1.2.3`); required.
	Command string
	// Publisher is the identity Signer signs as, with the name the catalog
	// shows: the publisher of the first-party plugins in the catalog.
	Publisher plugins.Signer
	// Out is the directory of the release's files; it must not exist yet.
	Out string
	// Platforms are the images' platforms; nil means images.Platforms().
	Platforms []v1.Platform
	// Untagged pushes the images by digest only; TagImages tags them with
	// the version once the release is published (the release workflow).
	// Otherwise each index is tagged with the version as it is pushed.
	Untagged bool
	// AllowDirty releases a tree with uncommitted changes; tests only. A
	// release is of a commit, which is what makes it reproducible.
	AllowDirty bool
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// CatalogPlugins are the first-party plugins a release pins in its
// catalog (D-43), in the catalog's order.
var CatalogPlugins = []string{"nbp-fx", "ibkr-flex"}

// pluginImages are built and signed before the catalog is written: the
// catalog's plugins and the check probe (OF-29), which the release names
// in its ConfigMap.
var pluginImages = append(append([]string(nil), CatalogPlugins...), overlay.CheckProbe)

// platformImages are built after the catalog, the operator with it.
var platformImages = []string{"operator", "egress-proxy", "openfief-core"}

// Result is a finished release.
type Result struct {
	Version string
	// Commit is the commit the release was built from.
	Commit string
	// Out is the directory of the release's files.
	Out string
	// Images are every image index pushed and signed, by name.
	Images map[string]plugins.ImageRef
	// Attestations are the referrers carrying each index's signed SBOM and
	// provenance, by image name.
	Attestations map[string]images.Attested
	// Catalog is the plugins.json linked into the operator and the CLI.
	Catalog []byte
	// CatalogSignature is the Sigstore bundle of Catalog, signed by the
	// release's signer (CatalogSignatureFile).
	CatalogSignature []byte
	// CLI are the openfief binaries of the release by file name
	// (CLIFile), each with the catalog, the version and the check probe
	// linked in.
	CLI map[string][]byte
	// Files are the release's files, relative to Out, sorted.
	Files []string
}

// Make makes the release o describes. Nothing is written to Out unless
// every image was built, pushed and signed; a failure after that leaves
// Out partly written, and the images pushed (a registry keeps what it got).
func Make(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	src, err := images.ReadSource(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	if src.Dirty != "" && !o.AllowDirty {
		return nil, fmt.Errorf("the tree has uncommitted changes: a release is made from a commit (git status)")
	}
	src.Version = o.Version
	res := &Result{Version: o.Version, Commit: src.Commit, Out: o.Out, Images: map[string]plugins.ImageRef{}, Attestations: map[string]images.Attested{}}

	fmt.Fprintf(o.Progress, "release %s of %s (commit %s)\n", o.Version, src.Root, src.Commit)
	if err := o.buildPushSign(ctx, src, pluginImages, nil, res); err != nil {
		return nil, err
	}
	if res.Catalog, err = Catalog(o.Publisher, res.Images); err != nil {
		return nil, err
	}
	if res.CatalogSignature, err = SignCatalog(ctx, o.Signer, res.Catalog, o.Version); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "catalog: %d plugins published by %s, signed\n", len(CatalogPlugins), o.Publisher.Name)
	link := map[string]map[string]string{"operator": {catalog.Symbol: catalog.Encode(res.Catalog)}}
	if err := o.buildPushSign(ctx, src, platformImages, link, res); err != nil {
		return nil, err
	}
	if res.CLI, err = o.buildCLI(ctx, src, res); err != nil {
		return nil, err
	}
	if res.Files, err = writeFiles(ctx, o, src, res); err != nil {
		return nil, err
	}
	return res, nil
}

func (o Options) check() error {
	var errs []error
	if o.Root == "" {
		errs = append(errs, errors.New("root: required (the repository)"))
	}
	if !semver.IsValid(o.Version) || semver.Build(o.Version) != "" || semver.Canonical(o.Version) != o.Version {
		errs = append(errs, fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH, optionally with a pre-release (v1.2.0, v1.3.0-rc.1)", o.Version))
	}
	if o.Registry == "" {
		errs = append(errs, errors.New("registry: required (host[:port][/path])"))
	}
	if o.Signer == nil {
		errs = append(errs, errors.New("signer: required (a key or keyless)"))
	}
	if o.BuilderID == "" {
		errs = append(errs, errors.New("builder id: required (the provenance's runDetails.builder.id)"))
	}
	if o.Command == "" {
		errs = append(errs, errors.New("command: required (the provenance's build command)"))
	}
	if o.Publisher.Name == "" {
		errs = append(errs, errors.New("publisher: the signer's identity and name are required"))
	}
	if o.Out == "" {
		errs = append(errs, errors.New("out: required"))
	} else if _, err := os.Stat(o.Out); err == nil {
		errs = append(errs, fmt.Errorf("out: %s already exists; a release never overwrites another's files", o.Out))
	}
	return errors.Join(errs...)
}

// buildPushSign builds the named images for every platform, pushes their
// indexes, signs each and attaches its signed SBOM and provenance,
// recording the references in res.Images and res.Attestations.
func (o Options) buildPushSign(ctx context.Context, src images.Source, names []string, link map[string]map[string]string, res *Result) error {
	specs, err := images.SelectSpecs(names...)
	if err != nil {
		return err
	}
	built, err := images.Build(ctx, images.Options{Source: src, Specs: specs, Platforms: o.Platforms, Progress: o.Progress, LinkStrings: link})
	if err != nil {
		return err
	}
	tag := src.Tag()
	if o.Untagged {
		tag = ""
	}
	pushed, err := images.Push(ctx, built, o.Registry, images.PushOptions{Insecure: o.Insecure, Tag: tag, Progress: o.Progress})
	if err != nil {
		return err
	}
	for _, p := range pushed {
		ref, err := plugins.ParseImageRef(p.Ref)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if err := sign(ctx, o.Signer, ref); err != nil {
			return fmt.Errorf("sign %s: %w", p.Name, err)
		}
		fmt.Fprintf(o.Progress, "signed %s\n", ref)
		res.Images[p.Name] = ref
	}
	attested, err := images.Attest(ctx, built, pushed, o.Signer, images.Provenance{BuilderID: o.BuilderID, Command: o.Command, LinkStrings: link}, o.Progress)
	if err != nil {
		return err
	}
	for _, a := range attested {
		res.Attestations[a.Name] = a
	}
	return nil
}

// SignCatalog signs a release's catalog file with s: a Sigstore bundle
// over an in-toto statement whose one subject is the file's SHA-256, of
// plugins.CatalogPredicateType, with the release's version as predicate,
// as `cosign attest-blob --new-bundle-format` writes one. The CLI uses a
// catalog file only when such a bundle from a publisher it knows verifies
// (cosign.VerifyFile).
func SignCatalog(ctx context.Context, s Signer, file []byte, version string) ([]byte, error) {
	b, err := signFile(ctx, s, file, plugins.CatalogPredicateType, version)
	if err != nil {
		return nil, fmt.Errorf("sign the catalog: %w", err)
	}
	return b, nil
}

// ChecksumsPredicateType is the predicate type of a release's signature
// over its SHA256SUMS (ChecksumsSignatureFile): with it, the checksums,
// and through them every file of the release (the CLI binaries included),
// are the publisher's word, not only something that sits beside them.
const ChecksumsPredicateType = "https://github.com/arkadiuss/openfief/release-checksums/v1"

// signFile signs file with s as a statement of predicateType whose one
// subject is the file's SHA-256 and whose predicate names version.
func signFile(ctx context.Context, s Signer, file []byte, predicateType, version string) ([]byte, error) {
	pred, err := json.Marshal(map[string]string{"version": version})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(file)
	stmt, err := ocisign.StatementWith("sha256:"+hex.EncodeToString(sum[:]), predicateType, pred)
	if err != nil {
		return nil, err
	}
	return s.Bundle(ctx, stmt)
}

// cliPackage is the CLI's main package.
const cliPackage = "./cmd/openfief"

// buildCLI builds the openfief binary for every platform of the release
// with the catalog, the version and the check probe linked in, as the
// operator gets the catalog: the CLI of a release says Verified exactly
// when that release's operator does, and runs that release's check probe
// (OF-29, OF-30).
func (o Options) buildCLI(ctx context.Context, src images.Source, res *Result) (map[string][]byte, error) {
	probe, ok := res.Images[overlay.CheckProbe]
	if !ok {
		return nil, fmt.Errorf("the CLI: no check probe was built")
	}
	link := map[string]string{
		catalog.Symbol:        catalog.Encode(res.Catalog),
		catalog.VersionSymbol: res.Version,
		catalog.CommitSymbol:  res.Commit,
		catalog.ProbeSymbol:   probe.String(),
	}
	platforms := o.Platforms
	if platforms == nil {
		platforms = images.Platforms()
	}
	out := map[string][]byte{}
	for _, p := range platforms {
		bin, err := images.BuildBinary(ctx, "", src.Root, p, cliPackage, link)
		if err != nil {
			return nil, fmt.Errorf("the CLI for %s: %w", p, err)
		}
		out[CLIFile(p)] = bin
		fmt.Fprintf(o.Progress, "built %s\n", CLIFile(p))
	}
	return out, nil
}

// sign signs ref's digest as `cosign sign` does and attaches the bundle as
// a referrer of it (ocisign.KeySigner.Sign, for any Signer).
func sign(ctx context.Context, s Signer, ref plugins.ImageRef) error {
	stmt, err := ocisign.Statement(ref.Digest(), plugins.SignPredicateType)
	if err != nil {
		return err
	}
	bundle, err := s.Bundle(ctx, stmt)
	if err != nil {
		return err
	}
	_, err = ocisign.Attach(ctx, ref, bundle, plugins.SignPredicateType)
	return err
}

// catalogFile and its entries are plugins.json's shape (plugins.ParseCatalog).
type catalogFile struct {
	Plugins []catalogEntry `json:"plugins"`
}

type catalogEntry struct {
	Name      string        `json:"name"`
	Image     string        `json:"image"`
	Publisher publisherJSON `json:"publisher"`
}

type publisherJSON struct {
	Name      string `json:"name"`
	Issuer    string `json:"issuer,omitempty"`
	Subject   string `json:"subject,omitempty"`
	PublicKey string `json:"publicKey,omitempty"`
}

// Catalog writes the catalog of a release: every one of CatalogPlugins,
// pinned to its image in refs and published by publisher, whose identity
// must be exact (D-44). The result parses with plugins.ParseCatalog.
func Catalog(publisher plugins.Signer, refs map[string]plugins.ImageRef) ([]byte, error) {
	id := publisher.Identity
	pub := publisherJSON{Name: publisher.Name, Issuer: id.Issuer, Subject: id.Subject, PublicKey: id.PublicKeyPEM}
	f := catalogFile{}
	for _, name := range CatalogPlugins {
		ref, ok := refs[name]
		if !ok {
			return nil, fmt.Errorf("catalog: no image for %s", name)
		}
		f.Plugins = append(f.Plugins, catalogEntry{Name: name, Image: ref.String(), Publisher: pub})
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	raw = append(raw, '\n')
	if _, err := plugins.ParseCatalog(raw); err != nil {
		return nil, fmt.Errorf("the release's catalog does not parse: %w", err)
	}
	return raw, nil
}

// write writes name under dir with mode, creating dir.
func write(dir, name string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), data, mode)
}
