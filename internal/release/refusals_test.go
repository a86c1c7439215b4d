package release

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestMakeRefuses: bad options are refused before anything is built.
func TestMakeRefuses(t *testing.T) {
	signer, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	existing := t.TempDir()
	base := Options{Root: "/nonexistent", Version: "v1.0.0", Registry: "127.0.0.1:1", Signer: signer,
		BuilderID: images.LocalBuilderID, Command: "make release VERSION=v1.0.0",
		Publisher: plugins.Signer{Name: "p"}, Out: filepath.Join(existing, "out")}
	for name, tc := range map[string]struct {
		edit func(*Options)
		want string
	}{
		"no v":          {func(o *Options) { o.Version = "1.0.0" }, "version"},
		"short":         {func(o *Options) { o.Version = "v1.0" }, "version"},
		"build":         {func(o *Options) { o.Version = "v1.0.0+meta" }, "version"},
		"no registry":   {func(o *Options) { o.Registry = "" }, "registry"},
		"no signer":     {func(o *Options) { o.Signer = nil }, "signer"},
		"no publisher":  {func(o *Options) { o.Publisher = plugins.Signer{} }, "publisher"},
		"no builder":    {func(o *Options) { o.BuilderID = "" }, "builder id"},
		"no command":    {func(o *Options) { o.Command = "" }, "command"},
		"existing out":  {func(o *Options) { o.Out = existing }, "already exists"},
		"several wrong": {func(o *Options) { o.Version, o.Registry = "x", "" }, "registry"},
	} {
		o := base
		tc.edit(&o)
		if _, err := Make(context.Background(), o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

// TestCatalogRefusesAPattern: a publisher's identity is exact (D-44).
func TestCatalogRefusesAPattern(t *testing.T) {
	refs := map[string]plugins.ImageRef{}
	for i, n := range CatalogPlugins {
		ref, err := plugins.ParseImageRef("r.example/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('1'+i)), 64))
		if err != nil {
			t.Fatal(err)
		}
		refs[n] = ref
	}
	ci := plugins.OpenFiefCI()
	if raw, err := Catalog(ci, refs); err != nil || !bytes.Contains(raw, []byte(plugins.OpenFiefCISubject)) {
		t.Errorf("a catalog published by OpenFief's CI: %v\n%s", err, raw)
	}
	ci.Identity.Subject, ci.Identity.SubjectPattern = "", ".*"
	if _, err := Catalog(ci, refs); err == nil {
		t.Error("a publisher with a subject pattern was accepted")
	}
	delete(refs, "ibkr-flex")
	if _, err := Catalog(plugins.OpenFiefCI(), refs); err == nil {
		t.Error("a catalog without ibkr-flex's image was written")
	}
}
