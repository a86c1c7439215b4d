//go:build cluster

package corecli

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestDashboardCoreMintsAnew: the dashboard's reader of the core outlives
// one owner token, so when the real core refuses the token it holds (here
// the owner's ServiceAccount was deleted and created again, which revokes
// every token of the old one) the reader says so once and mints a new token
// for its next question instead of repeating the refused one.
func TestDashboardCoreMintsAnew(t *testing.T) {
	dc := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{testutil.CRDDir()}})
	cs, err := kubernetes.NewForConfig(dc.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "corecli-dash"
	testutil.EnsureNamespaces(t, cs, ns)
	testutil.EnsureServiceAccount(t, cs, ns, ownerapi.ServiceAccount)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := core.Start(ctx, dc.Config, core.Options{
		Namespace: ns, ServiceAccount: core.DefaultServiceAccount,
		Store: st, PluginAddr: "127.0.0.1:0", OwnerAddr: "127.0.0.1:0",
		// Every owner request is reviewed, so the refusal shows at once.
		TokenCacheTTL: -1,
		Log:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	env := cli.NewEnv(cli.Streams{})
	env.Kubeconfig, env.Namespace = dc.KubeconfigPath, ns
	read, err := env.DashboardCore("http://" + c.OwnerAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(ctx); err != nil {
		t.Fatalf("the first question: %v", err)
	}
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(ctx, ownerapi.ServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EnsureServiceAccount(t, cs, ns, ownerapi.ServiceAccount)
	// The API server keeps authenticating a token for up to ten seconds.
	testutil.Eventually(t, 60*time.Second, "the core refuses the token minted for the deleted ServiceAccount", func() (bool, string) {
		_, err := read(ctx)
		if err == nil {
			return false, "answered"
		}
		return strings.Contains(err.Error(), "refused the owner's token"), err.Error()
	})
	if _, err := read(ctx); err != nil {
		t.Errorf("the question after the refusal: %v; want a new token minted and an answer", err)
	}
}
