package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelp checks every command has --help text with examples, exits 0, and
// that usage mistakes exit with ExitUsage.
func TestHelp(t *testing.T) {
	root := NewRootCommand(NewEnv(Streams{}))
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			return
		}
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(paths) < 10 {
		t.Fatalf("found only %d commands: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(append([]string{"openfief"}, p...), " ")
		r := openfief(t, nil, runOpts{}, append(p, "--help")...)
		expect(t, r, ExitOK, "Usage:", "Examples:", name)
		if !strings.Contains(r.out, "--kubeconfig") {
			t.Errorf("%s --help does not show the global flags", name)
		}
	}

	for _, args := range [][]string{
		{"bogus"},
		{"plugin", "bogus"},
		{"plugin", "verify"},
		{"plugin", "install", "fx"},
		{"plugin", "status"},
		{"plugin", "list", "extra"},
		{"plugin", "list", "--bogus"},
		{"plugin", "list", "-o", "wide"},
	} {
		r := openfief(t, nil, runOpts{}, args...)
		expect(t, r, ExitUsage, "Error: ", "--help' for usage")
	}
}

// TestKubeconfigFlags checks --kubeconfig and --context errors are usage
// errors that name the flag's file or context.
func TestKubeconfigFlags(t *testing.T) {
	missing := t.TempDir() + "/kubeconfig"
	r := openfief(t, nil, runOpts{}, "--kubeconfig", missing, "plugin", "list")
	expect(t, r, ExitUsage, "kubeconfig", missing)

	kc := tempFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: one
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: t}
current-context: one
`)
	r = openfief(t, nil, runOpts{}, "--kubeconfig", kc, "--context", "two", "plugin", "list")
	expect(t, r, ExitUsage, `context "two" does not exist`)
	r = openfief(t, nil, runOpts{}, "--kubeconfig", kc, "--context", "one", "plugin", "list")
	expect(t, r, ExitFailure, "listing plugins", "127.0.0.1:1")
}
