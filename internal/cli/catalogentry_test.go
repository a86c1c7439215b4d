package cli

import (
	"errors"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	imagetrust "github.com/arkadiuss/openfief/internal/trust"
)

// TestLookupCatalogMessage: an entry the catalog does not hold is refused
// with a sentence naming the catalog as the report names it, and what it
// lists.
func TestLookupCatalogMessage(t *testing.T) {
	p, err := imagetrust.NewPolicyWithCatalog(plugins.Catalog{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := trust{policy: p, catalog: builtinCatalogSource(plugins.Catalog{}, "")}
	_, err = lookupCatalog(tr, "nbp-fx")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitNotFound {
		t.Fatalf("%v, want exit %d", err, ExitNotFound)
	}
	const want = "--catalog nbp-fx: no such entry in this CLI's built-in catalog, of a development build (0 plugins): it lists no plugin (openfief catalog list)"
	if err.Error() != want {
		t.Errorf("%q\nwant %q", err, want)
	}
}
