//go:build cluster

package cli

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestImportRefusals: what `plugin import` refuses before sending anything,
// and the answer when no openfief-core is installed (the API server's
// service proxy finds no Service): a failure that says so, never "plugin
// not found". `plugin status` says the same in its Core section and still
// exits 0. The path through a running core is in the end-to-end suite
// (test/e2e TestCoreSyncsConnector); the owner's token in TestOwnerToken.
func TestImportRefusals(t *testing.T) {
	k := newKube(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The owner's token is minted first; here it can be.
	testutil.EnsureServiceAccount(t, cs, plugins.Namespace, ownerapi.ServiceAccount)
	t.Setenv(EnvCoreURL, "")
	file := tempFile(t, "statement.csv", "a;b\n")
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "Bad_Name", file), ExitInvalid, "plugin name")
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "fx", file+".missing"), ExitUsage, "no such file")
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "fx", file, "--core-url", "ftp://core:1"), ExitUsage, "want http(s)://host:port")
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "fx", file), ExitFailure, "no openfief-core answered (HTTP")
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "fx", file, "--core-url", "http://127.0.0.1:1"), ExitFailure, "reaching the core through http://127.0.0.1:1")
	expect(t, openfief(t, k, runOpts{}, "plugin", "import"), ExitUsage)
}
