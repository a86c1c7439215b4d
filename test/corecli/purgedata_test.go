//go:build cluster

package corecli

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// runOpts is a command's standard input and whether a person is there.
type runOpts struct {
	stdin       string
	interactive bool
}

type result struct {
	code int
	out  string
}

// openfief runs the CLI in process with the test cluster's kubeconfig.
func openfief(t *testing.T, kubeconfig string, o runOpts, args ...string) result {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := cli.Main(ctx, append([]string{"--kubeconfig", kubeconfig}, args...),
		cli.Streams{In: strings.NewReader(o.stdin), Out: &out, ErrOut: &out, Interactive: o.interactive})
	return result{code: code, out: out.String()}
}

// expect fails unless r exited with code and its output holds every want.
func expect(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\n%s", r.code, code, r.out)
	}
	for _, w := range want {
		if !strings.Contains(r.out, w) {
			t.Errorf("output lacks %q\n%s", w, r.out)
		}
	}
}

// TestPurgeData runs `plugin uninstall --purge-data`, `plugin purge-data`
// and `plugin status` against the real openfief-core, in process, on the
// test API server: the core sees the Plugin deleted and marks its data
// removed, the CLI waits for that, shows the rows per table and purges
// exactly that instance; an older removed instance is listed, kept without
// confirmation and purged by its key; a live instance is never purged.
func TestPurgeData(t *testing.T) {
	dc := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{testutil.CRDDir()}})
	cfg, kubeconfig := dc.Config, dc.KubeconfigPath
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	testutil.EnsureNamespaces(t, cs, plugins.Namespace)
	// The owner's ServiceAccount: the CLI mints the owner's token for it
	// with the admin's kubeconfig.
	testutil.EnsureServiceAccount(t, cs, plugins.Namespace, ownerapi.ServiceAccount)
	plugin := func(name string) *v1alpha1.Plugin {
		t.Helper()
		var p v1alpha1.Plugin
		err := kc.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &p)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	c, err := core.Start(ctx, cfg, core.Options{
		Store: st, PluginAddr: "127.0.0.1:0", OwnerAddr: "127.0.0.1:0",
		Scheduler: core.SchedulerOptions{FirstSyncDelay: -1, DefaultInterval: time.Hour},
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	t.Setenv(cli.EnvCoreURL, "http://"+c.OwnerAddr())

	// Installed Plugins with data the core stored for them (imported here:
	// they do not run), and an older removed instance.
	now := time.Now()
	install := func(name string, n int) string {
		t.Helper()
		p := testutil.MakePlugin(name, testutil.Image("fx")).Obj()
		if err := kc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Claim(ctx, name, string(p.UID), now); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Import(ctx, name, store.KindSync, storetest.Sync("b1", 0, n, "w1")); err != nil {
			t.Fatal(err)
		}
		return string(p.UID)
	}
	install("pd-bank", 12)
	install("pd-live", 7)
	oldUID := "5e5e5e5e-3333-4a4a-8b8b-000000000003"
	if _, err := st.Claim(ctx, "pd-old", oldUID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, "pd-old", store.KindSync, storetest.Sync("b1", 0, 3, "w1")); err != nil {
		t.Fatal(err)
	}
	// Uninstalled earlier: marked removed, as the core did then.
	const oldKey = "pd-old~5e5e5e5e"
	if key, err := st.MarkRemoved(ctx, "pd-old", oldUID, now.Add(-time.Hour)); err != nil || key != oldKey {
		t.Fatalf("MarkRemoved(pd-old) = %q, %v", key, err)
	}

	// Not confirmed: nothing is deleted.
	r := openfief(t, kubeconfig, runOpts{}, "plugin", "uninstall", "pd-bank", "--purge-data")
	expect(t, r, cli.ExitNotConfirmed, "the data openfief-core stored for it")
	if plugin("pd-bank") == nil {
		t.Fatal("the unconfirmed uninstall deleted the Plugin")
	}

	before, err := st.Count(ctx, "pd-live")
	if err != nil {
		t.Fatal(err)
	}
	r = openfief(t, kubeconfig, runOpts{}, "plugin", "uninstall", "pd-bank", "--purge-data", "--yes")
	expect(t, r, cli.ExitOK, "plugin/pd-bank deleted", "openfief-core to mark the data of plugin pd-bank removed",
		"it is kept as pd-bank~", "transactions        12", "postings            24", "total", "purged the data of pd-bank~")
	if removed, err := st.RemovedInstances(ctx); err != nil || len(removed) != 1 || removed[0].Key != oldKey {
		t.Errorf("removed instances after the purge: %+v, %v; want %s alone", removed, err, oldKey)
	}
	if after, err := st.Count(ctx, "pd-live"); err != nil || after != before {
		t.Errorf("the live instance's rows %+v, %v; want %+v untouched", after, err, before)
	}

	// The older one: listed, shown by status, kept without confirmation.
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "purge-data"), cli.ExitOK, oldKey, "plugin pd-old, removed ")
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "status", "pd-old"), cli.ExitNotFound, "Removed data", oldKey)
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "purge-data", oldKey), cli.ExitNotConfirmed, "transactions        3")
	if n, err := st.Count(ctx, oldKey); err != nil || n.Rows.Transactions != 3 {
		t.Errorf("the unconfirmed purge deleted: %+v, %v", n, err)
	}
	r = openfief(t, kubeconfig, runOpts{stdin: "y\n", interactive: true}, "plugin", "purge-data", oldKey)
	expect(t, r, cli.ExitOK, "purged the data of "+oldKey)
	if n, err := st.Count(ctx, oldKey); err != nil || n.Total() != 0 {
		t.Errorf("after the purge %s holds %+v, %v", oldKey, n, err)
	}
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "purge-data"), cli.ExitOK, "keeps no data of uninstalled plugins")

	// Never a live instance; a malformed key is refused before any call.
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "purge-data", "pd-live", "--yes"), cli.ExitUsage, "still installed")
	if after, err := st.Count(ctx, "pd-live"); err != nil || after != before {
		t.Errorf("the live instance's rows %+v, %v; want %+v untouched", after, err, before)
	}
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "purge-data", "../status"), cli.ExitUsage, "only lower-case letters")
	expect(t, openfief(t, kubeconfig, runOpts{}, "plugin", "purge-data", "pd-gone~00000000", "--yes"), cli.ExitNotFound, "keeps no data as pd-gone~00000000")
	if !strings.Contains(openfief(t, kubeconfig, runOpts{}, "plugin", "status", "pd-live").out, "Rows:       ") {
		t.Error("the live plugin's status lost its core part")
	}
	if p := plugin("pd-live"); p != nil {
		_ = kc.Delete(ctx, p)
	}
}
