//go:build cluster

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// coreStatus reads the core's status of instance from its owner API.
func coreStatus(t *testing.T, instance string) ownerapi.InstanceStatus {
	t.Helper()
	cs, err := stack.Cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return testutil.CoreStatus(t, cs, plugins.Namespace, stack.CoreURL, instance)
}

// whoami calls the core's plugin API with token and returns the HTTP status.
func whoami(t *testing.T, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+stack.Core.PluginAddr()+core.PathWhoAmI, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestCoreSyncsConnector: nbp-fx installed and approved on the platform
// runs as a local process; the core, running as its ServiceAccount with the
// RBAC of deploy/core, calls its Sync on schedule with a token the SDK
// accepts, through the real egress proxy to the loopback NBP; the rows are
// stored; later syncs carry the returned watermark and store nothing twice;
// `openfief plugin status` shows it; the plugin's own token is accepted by
// the core and another's is not; revoking the grant stops the calls.
func TestCoreSyncsConnector(t *testing.T) {
	c := kube(t)
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	const name = "nbp-core"
	port := freePort(t)
	localPlugins.set(name, fmt.Sprintf("http://127.0.0.1:%d", port))
	installNBP(t, name)
	before := nbp.Requests.Load()
	runLocally(t, c, cs, name, port)

	testutil.Eventually(t, waitTimeout, "the core to store nbp-fx's rates", func() (bool, string) {
		st := coreStatus(t, name)
		return st.LastOK && st.Rows.FxRates >= 2 && st.Watermark != "", fmt.Sprintf("%+v", st)
	})
	if nbp.Requests.Load() == before {
		t.Error("the plugin did not reach NBP through the proxy")
	}
	first := coreStatus(t, name)
	// Later syncs (every 2 s here) carry the stored watermark; NBP's
	// stand-in answers the same table, so nothing is stored twice.
	testutil.Eventually(t, waitTimeout, "two more syncs", func() (bool, string) {
		st := coreStatus(t, name)
		return st.LastOK && st.Rows.Batches >= first.Rows.Batches+2, fmt.Sprintf("%+v", st)
	})
	again := coreStatus(t, name)
	if again.Rows.FxRates != first.Rows.FxRates || again.Watermark != first.Watermark {
		t.Errorf("after more syncs %d rates, watermark %q; want %d and %q: stored twice", again.Rows.FxRates, again.Watermark, first.Rows.FxRates, first.Watermark)
	}
	if !again.Scheduled || again.NextSync == nil {
		t.Errorf("status %+v: want a next sync", again)
	}
	out := openfief(t, 0, "plugin", "status", name, "--core-url", stack.CoreURL)
	for _, want := range []string{"Core (openfief-core):", "Last sync:", "succeeded", "Next sync:", fmt.Sprintf("FX rates %d", again.Rows.FxRates)} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin status lacks %q", want)
		}
	}

	// The owner's import reaches the plugin's ImportFile; nbp-fx has none,
	// and the refusal comes back with nothing stored.
	file := filepath.Join(t.TempDir(), "rates.csv")
	must(t, os.WriteFile(file, []byte("USD;3.6589\n"), 0o600))
	out = openfief(t, cli.ExitInvalid, "plugin", "import", name, file, "--core-url", stack.CoreURL)
	if !strings.Contains(out, "unimplemented") {
		t.Errorf("import into nbp-fx: %s", out)
	}

	// The plugin's openfief-core token reaches the core's plugin API;
	// another instance's ServiceAccount and another audience do not.
	own := requestToken(t, cs, plugins.ServiceAccountName(name), plugins.AudienceCore)
	if code := whoami(t, own); code != http.StatusOK {
		t.Errorf("the plugin's own token: %d", code)
	}
	if code := whoami(t, requestToken(t, cs, plugins.ServiceAccountName(name), plugins.AudienceEgress)); code != http.StatusUnauthorized {
		t.Errorf("the egress token at the core: %d, want 401", code)
	}

	// Revoking the grant stops the calls at once, and the plugin's token.
	openfief(t, 0, "plugin", "revoke", name, "--yes")
	testutil.Eventually(t, waitTimeout, "the core to stop calling", func() (bool, string) {
		st := coreStatus(t, name)
		return !st.Scheduled, fmt.Sprintf("%+v", st)
	})
	stopped := coreStatus(t, name)
	calls := nbp.Requests.Load()
	time.Sleep(3 * 2 * time.Second) // three intervals
	if st := coreStatus(t, name); st.Rows.Batches != stopped.Rows.Batches || st.LastSync == nil || !st.LastSync.Equal(*stopped.LastSync) {
		t.Errorf("after the revocation: %+v, was %+v", st, stopped)
	}
	if n := nbp.Requests.Load(); n != calls {
		t.Errorf("NBP was asked %d more times after the revocation", n-calls)
	}
	if code := whoami(t, own); code != http.StatusUnauthorized {
		t.Errorf("the revoked plugin's token: %d, want 401", code)
	}
	openfief(t, 0, "plugin", "uninstall", name, "--yes", "--purge", "--wait", "60s")
}
