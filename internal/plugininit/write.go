package plugininit

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

// skeleton holds the projects' files: go/ and ts/ (common/ beside one
// folder per kind), manifest/ (one manifest per kind) and README.md.tmpl.
//
//go:embed skeleton
var skeleton embed.FS

// File is one file of a project.
type File struct {
	// Path is relative to the project's folder, with forward slashes.
	Path string
	Data []byte
}

// templateData is what the *.tmpl files are given.
type templateData struct {
	Name, Lang, Kind string
	// GoSDKVersion is the version go.mod requires of the Go SDK.
	GoSDKVersion string
	// GoSDKReplace is the local folder go.mod replaces the Go SDK with, if any.
	GoSDKReplace string
	// TSSDK is the version (or "file:" folder) package.json depends on.
	TSSDK string
}

// Files renders the project o describes, sorted by path. The same Options
// give the same bytes. o must have passed Validate.
func Files(o Options) ([]File, error) {
	data := templateData{Name: o.Name, Lang: string(o.Lang), Kind: string(o.Kind), GoSDKVersion: DevGoSDKVersion, TSSDK: TSSDKVersion}
	if o.Version != "" {
		data.GoSDKVersion = o.Version
	}
	if o.SDK != "" {
		data.GoSDKReplace = goModPath(o.SDK)
		data.TSSDK = "file:" + o.SDK
	}
	var files []File
	add := func(src, dst string) error {
		raw, err := skeleton.ReadFile(src)
		if err != nil {
			return err
		}
		if strings.HasSuffix(src, ".tmpl") {
			if raw, err = render(src, raw, data); err != nil {
				return err
			}
		}
		files = append(files, File{Path: dst, Data: raw})
		return nil
	}
	for _, dir := range []string{path.Join("skeleton", string(o.Lang), "common"), path.Join("skeleton", string(o.Lang), string(o.Kind))} {
		err := fs.WalkDir(skeleton, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			return add(p, outputPath(strings.TrimPrefix(p, dir+"/")))
		})
		if err != nil {
			return nil, err
		}
	}
	if err := add(path.Join("skeleton", "manifest", string(o.Kind)+".json.tmpl"), "manifest.json"); err != nil {
		return nil, err
	}
	if err := add("skeleton/README.md.tmpl", "README.md"); err != nil {
		return nil, err
	}
	if o.Lang == TypeScript && o.SDK != "" {
		// npm links a "file:" folder by default, and the SDK would then load
		// the protobuf and Connect runtimes from that folder's node_modules
		// instead of the project's: install it as a package instead.
		files = append(files, File{Path: ".npmrc", Data: []byte("install-links=true\n")})
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// outputPath is the project path of a skeleton file: without ".tmpl", and
// with a leading "dot-" of its name written as ".".
func outputPath(rel string) string {
	rel = strings.TrimSuffix(rel, ".tmpl")
	dir, name := path.Split(rel)
	if rest, ok := strings.CutPrefix(name, "dot-"); ok {
		name = "." + rest
	}
	return dir + name
}

// goModPath writes a folder as go.mod takes it: bare when it is made of
// path characters only, else quoted.
func goModPath(dir string) string {
	if strings.Trim(dir, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") == "" {
		return dir
	}
	b, _ := json.Marshal(dir) // a JSON string without control characters is a Go string too
	return string(b)
}

func render(name string, raw []byte, data templateData) ([]byte, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(string(raw))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ErrNotEmpty is returned by Write for a folder that already holds files.
var ErrNotEmpty = errors.New("not empty: plugin init writes only into a new or empty folder")

// Write writes the project o describes into dir, which must be missing or
// empty; it returns the files' paths, relative to dir. o must have passed
// Validate. No file is overwritten, and none is followed through a link.
func Write(dir string, o Options) ([]string, error) {
	files, err := Files(o)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return nil, &OptionError{"--dir", ErrNotEmpty}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, &OptionError{"--dir", err}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &OptionError{"--dir", err}
	}
	var written []string
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, err
		}
		if err := writeNew(p, f.Data); err != nil {
			return written, err
		}
		written = append(written, f.Path)
	}
	return written, nil
}

// writeNew creates p, failing when anything is there already.
func writeNew(p string, data []byte) error {
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.Write(data); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}
