package cli

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestInsecureRegistriesFromEnv: --insecure-registry defaults to the
// registries of $OPENFIEF_INSECURE_REGISTRIES, and a flag replaces them.
func TestInsecureRegistriesFromEnv(t *testing.T) {
	t.Setenv(EnvInsecureRegistries, " 10.244.0.1:5000, ,registry.lan ")
	var f trustFlags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.register(fs, false)
	if want := []string{"10.244.0.1:5000", "registry.lan"}; !slices.Equal(f.insecure, want) {
		t.Errorf("from the environment: %q, want %q", f.insecure, want)
	}
	if err := fs.Parse([]string{"--insecure-registry", "other:5000"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"other:5000"}; !slices.Equal(f.insecure, want) {
		t.Errorf("with the flag: %q, want %q", f.insecure, want)
	}
	t.Setenv(EnvInsecureRegistries, "")
	var g trustFlags
	g.register(pflag.NewFlagSet("t", pflag.ContinueOnError), false)
	if len(g.insecure) != 0 {
		t.Errorf("with no variable: %q", g.insecure)
	}
}
