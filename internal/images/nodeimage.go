package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// NodeEntrypoint is how a TypeScript plugin's image starts: Debian's
// Node.js on the plugin's compiled main module, trusting OpenSSL's store
// (--use-openssl-ca), which the runtime layer points at CABundlePath,
// instead of the roots compiled into Node.js: the image trusts its CA
// bundle, as the Go images do.
var NodeEntrypoint = []string{"/usr/bin/node", "--use-openssl-ca", "/app/main.js"}

// opensslDir is OPENSSLDIR of Debian's libssl: OpenSSL's default store is
// its cert.pem file and certs folder, which Debian's openssl package links
// to the system bundle; the runtime layer makes the same links.
const opensslDir = "usr/lib/ssl"

// NodePlugin is what a TypeScript plugin's image is built from
// (docs/decisions.md: the TypeScript plugin image).
type NodePlugin struct {
	// Name is the image's title annotation.
	Name, Description, Licenses string
	// ManifestJSON is the plugin's manifest.json; its compacted JSON is the
	// manifest label.
	ManifestJSON []byte
	// Runtimes maps each platform's architecture (amd64, arm64) to the
	// directory NodeRuntime returned for it: rootfs/ is the runtime
	// layer, packages.tsv its package list.
	Runtimes map[string]string
	// App is the plugin's /app: main.js, its other modules, package.json
	// and the production node_modules (TSPluginApp).
	App string
	// ExtraCA, when set, is appended to the image's CA bundle: a test's
	// stand-in CA (Node.js reads the bundle file, not the folder).
	ExtraCA []byte
}

// nodeRuntimeDoc is the folder of the runtime layer that lists its
// packages (packages.tsv).
const nodeRuntimeDoc = "usr/share/doc/openfief-node-runtime"

// maxNodeLayerBytes bounds what one layer read from a directory may hold:
// a runtime is some 130 MiB.
const maxNodeLayerBytes = 512 << 20

// NodePluginIndex builds a TypeScript plugin's image for every platform
// of p.Runtimes, sorted by architecture, under one index: the users layer;
// the CA bundle (with p.ExtraCA); the runtime's files with the merged-/usr
// links Debian's base-files would make (/bin, /lib, /lib64 to their /usr
// folders); the application at /app. Every time is src.Epoch, entries are
// sorted and owned by 0:0, so the same runtime and application give the
// same digests.
func NodePluginIndex(src Source, p NodePlugin) (v1.ImageIndex, error) {
	label, err := ManifestLabel(p.ManifestJSON)
	if err != nil {
		return nil, fmt.Errorf("images: %s's manifest: %w", p.Name, err)
	}
	if len(p.Runtimes) == 0 {
		return nil, fmt.Errorf("images: %s: no Node.js runtime given", p.Name)
	}
	epoch := src.Epoch
	users, err := usersLayer(epoch)
	if err != nil {
		return nil, err
	}
	ca, err := newLayer([]entry{dir("etc/"), dir("etc/ssl/"), dir("etc/ssl/certs/"),
		file(CABundlePath[1:], 0o644, append(CABundle(), p.ExtraCA...))}, epoch)
	if err != nil {
		return nil, err
	}
	appEntries, err := treeEntries(p.App, "app/")
	if err != nil {
		return nil, fmt.Errorf("images: %s's application: %w", p.Name, err)
	}
	if !slices.ContainsFunc(appEntries, func(e entry) bool { return e.name == "app/main.js" && e.link == "" }) {
		return nil, fmt.Errorf("images: %s's application %s has no main.js", p.Name, p.App)
	}
	app, err := newLayer(appEntries, epoch)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		AnnotationCreated: epoch.Format(time.RFC3339), AnnotationDescription: p.Description,
		AnnotationLicenses: p.Licenses, AnnotationRevision: src.Commit, AnnotationSource: SourceURL,
		AnnotationTitle: p.Name, AnnotationVersion: src.Version,
	}
	labels := map[string]string{plugins.ManifestLabel: label}
	for k, v := range annotations {
		labels[k] = v
	}
	archs := make([]string, 0, len(p.Runtimes))
	for a := range p.Runtimes {
		archs = append(archs, a)
	}
	slices.Sort(archs)
	var imgs []v1.Image
	var platforms []v1.Platform
	for _, arch := range archs {
		runtime, err := nodeRuntimeLayer(p.Runtimes[arch], epoch)
		if err != nil {
			return nil, fmt.Errorf("images: the Node.js runtime for %s: %w", arch, err)
		}
		plat := v1.Platform{OS: "linux", Architecture: arch}
		img, err := assemble(plat, v1.Config{Entrypoint: NodeEntrypoint, User: User, WorkingDir: "/app", Labels: labels},
			[]historyLayer{{users, usersHistory}, {ca, caHistory}, {runtime, "Debian's nodejs and its dependencies (internal/images.NodeRuntime)"},
				{app, "/app: the plugin's JavaScript and production node_modules"}}, epoch, annotations)
		if err != nil {
			return nil, err
		}
		imgs, platforms = append(imgs, img), append(platforms, plat)
	}
	return newIndex(imgs, platforms, annotations), nil
}

// nodeRuntimeLayer is the runtime layer of the directory NodeRuntime
// made: its rootfs/ with the merged-/usr links.
func nodeRuntimeLayer(runtimeDir string, epoch time.Time) (v1.Layer, error) {
	if _, err := os.Stat(filepath.Join(runtimeDir, "packages.tsv")); err != nil {
		return nil, fmt.Errorf("%s is not a finished runtime (no packages.tsv): %w", runtimeDir, err)
	}
	entries, err := treeEntries(filepath.Join(runtimeDir, "rootfs"), "")
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(entries, func(e entry) bool { return e.name == "usr/bin/node" }) {
		return nil, fmt.Errorf("%s has no usr/bin/node", runtimeDir)
	}
	packages, err := os.ReadFile(filepath.Join(runtimeDir, "packages.tsv"))
	if err != nil {
		return nil, err
	}
	// What the layer holds, for whoever inspects the image: every package
	// with its version and its .deb's SHA-256. Their licences are in
	// usr/share/doc/*/copyright, as the packages ship them.
	entries = append(entries, dir(nodeRuntimeDoc+"/"), file(nodeRuntimeDoc+"/packages.tsv", 0o644, packages))
	if slices.ContainsFunc(entries, func(e entry) bool { return strings.HasPrefix(e.name, opensslDir+"/") }) {
		return nil, fmt.Errorf("%s has a /%s of its own; only libssl's library was expected", runtimeDir, opensslDir)
	}
	entries = append(entries, dir(opensslDir+"/"),
		symlink(opensslDir+"/cert.pem", CABundlePath), symlink(opensslDir+"/certs", path.Dir(CABundlePath)))
	for _, l := range []struct{ name, to string }{{"bin", "usr/bin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}} {
		if slices.ContainsFunc(entries, func(e entry) bool { return e.name == l.name || e.name == l.name+"/" }) {
			return nil, fmt.Errorf("%s has a /%s of its own; merged-/usr packages were expected", runtimeDir, l.name)
		}
		if slices.ContainsFunc(entries, func(e entry) bool { return e.name == l.to+"/" }) {
			entries = append(entries, symlink(l.name, l.to))
		}
	}
	return newLayer(entries, epoch)
}

// treeEntries reads the tree under root as layer entries under prefix:
// folders, regular files (modes 0755 or 0644 by their execute bit) and
// symbolic links that stay inside the tree. Anything else (devices, pipes,
// sockets) and links that leave the tree are refused, as is a tree over
// maxNodeLayerBytes.
func treeEntries(root, prefix string) ([]entry, error) {
	var entries []entry
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			if prefix != "" {
				entries = append(entries, dir(prefix))
			}
			return nil
		}
		name := prefix + filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			entries = append(entries, dir(name+"/"))
		case mode&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			if err != nil {
				return err
			}
			target := to
			if !path.IsAbs(to) {
				target = path.Join(path.Dir("/"+name), to)
			}
			if strings.HasPrefix(path.Clean("/"+name), "/app/") && !strings.HasPrefix(path.Clean(target), "/app/") {
				return fmt.Errorf("%s links out of the application (to %s)", name, to)
			}
			entries = append(entries, symlink(name, to))
		case mode.IsRegular():
			if total += info.Size(); total > maxNodeLayerBytes {
				return fmt.Errorf("%s holds more than %s", root, MiB(maxNodeLayerBytes))
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			perm := int64(0o644)
			if mode&0o111 != 0 {
				perm = 0o755
			}
			entries = append(entries, file(name, perm, data))
		default:
			return fmt.Errorf("%s is neither a folder, a file nor a link (%v)", name, mode.Type())
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", root)
	}
	return entries, err
}
