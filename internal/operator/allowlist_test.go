//go:build cluster

package operator

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestAllowListWriterClosesAtOnce checks the writer's promises (OF-15)
// against the API server itself, not the cache: the ConfigMap exists, with
// no key, once the writer starts; a key that was only queued
// and then removed is never written; a change that drops a host, and a
// removal, are on the server when the call returns; opening changes land
// with the next batch.
func TestAllowListWriterClosesAtOnce(t *testing.T) {
	c, cl := testCluster(t)
	w := &AllowListWriter{}
	startManager(t, c, 0, func(mgr ctrl.Manager) error {
		w.Client = mgr.GetClient()
		return mgr.Add(w)
	})
	ctx := context.Background()
	server := func(key string) (string, bool) {
		t.Helper()
		var cm corev1.ConfigMap
		if err := cl.Get(ctx, allowListKey, &cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "", false
			}
			t.Fatal(err)
		}
		v, ok := cm.Data[key]
		return v, ok
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Before any plugin, the writer has made the ConfigMap, with no key:
	// the egress proxy is Ready only with one to read.
	testutil.Eventually(t, waitTimeout, "the allow-list ConfigMap made when the writer starts", func() (bool, string) {
		var cm corev1.ConfigMap
		if err := cl.Get(ctx, allowListKey, &cm); err != nil {
			return false, err.Error()
		}
		return true, ""
	})

	// Queued, then removed before the batch went out: never written.
	must(w.Set(ctx, "alw-dropped", []string{"api.nbp.pl"}))
	must(w.Remove(ctx, "alw-dropped"))

	// Opening: batched, lands without the caller waiting.
	must(w.Set(ctx, "alw-kept", []string{"api.nbp.pl", "static.nbp.pl"}))
	testutil.Eventually(t, waitTimeout, "the opening change written and cached", func() (bool, string) {
		v, ok := server("alw-kept")
		cached, _, err := w.cached(ctx, "alw-kept")
		return ok && v == plugins.EncodeAllowList([]string{"api.nbp.pl", "static.nbp.pl"}) && err == nil && cached == v, v
	})
	if _, ok := server("alw-dropped"); ok {
		t.Error("a key removed before its batch was written anyway")
	}

	// Closing a host: on the server when Set returns.
	must(w.Set(ctx, "alw-kept", []string{"api.nbp.pl"}))
	if v, _ := server("alw-kept"); v != plugins.EncodeAllowList([]string{"api.nbp.pl"}) {
		t.Errorf("after a narrowing Set the server holds %q", v)
	}
	// Removal: gone when Remove returns, even before the cache saw it.
	must(w.Remove(ctx, "alw-kept"))
	if v, ok := server("alw-kept"); ok {
		t.Errorf("after Remove the server still holds %q", v)
	}
}
