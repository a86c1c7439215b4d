//go:build cluster

package operator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// countingReader counts the whole objects read from the API server.
type countingReader struct {
	client.Reader
	reads atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestOwnedObjectsKnownByVersion runs ownedObjects on the real API server
// with the owned cache as the operator builds it (metadata only, plugin
// objects only), and counts what each pass costs (OF-63): an object seen
// whole at the version the watch reports is neither read nor written; a
// version that moved (another manager's edit) is read whole once and the
// edit applied away; a restarted operator reads each object once and
// writes nothing; a desired object that changed at a known version is
// applied unread; an object without the plugin label is not in the cache.
func TestOwnedObjectsKnownByVersion(t *testing.T) {
	c, cl := testCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	owned, err := cache.New(c.Config, cache.Options{
		Scheme: cl.Scheme(), DefaultNamespaces: map[string]cache.Config{plugins.Namespace: {}},
		DefaultLabelSelector: pluginObjects(selection.Exists), DefaultTransform: stripForCache,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = owned.Start(ctx) }()
	live := &countingReader{Reader: cl}

	p := testutil.MakePlugin("known", testutil.Image("known-1")).Obj()
	p.UID = types.UID("uid-known")
	desired := func(data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: plugins.ServiceAccountName(p.Name), Namespace: plugins.Namespace, Labels: PodLabels(p.Name)},
			Data:       map[string]string{configKey: data},
		}
	}
	var o *ownedObjects
	// pass applies desired once, waits until the cache holds the version
	// it left, and returns whether it wrote and how many whole reads it
	// made.
	pass := func(want *corev1.ConfigMap) (wrote bool, reads int64) {
		t.Helper()
		before := live.reads.Load()
		wrote, err := o.applyIfChanged(ctx, cl, want.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		reads = live.reads.Load() - before
		var now corev1.ConfigMap
		if err := cl.Get(ctx, client.ObjectKeyFromObject(want), &now); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, "the owned cache at the object's version", func() (bool, string) {
			rv, found, err := o.metadata(ctx, corev1.SchemeGroupVersion.WithKind("ConfigMap"), want.Name)
			return err == nil && found && rv == now.ResourceVersion, rv + " want " + now.ResourceVersion
		})
		if now.Data[configKey] != want.Data[configKey] {
			t.Fatalf("after the pass the object holds %q, want %q", now.Data[configKey], want.Data[configKey])
		}
		live.reads.Store(live.reads.Load() - 1) // the wait's own read above is not the pass's
		return wrote, reads
	}
	check := func(what string, wrote bool, reads int64, wantWrote bool, wantReads int64) {
		t.Helper()
		if wrote != wantWrote || reads != wantReads {
			t.Errorf("%s: wrote %v with %d whole reads, want wrote %v with %d", what, wrote, reads, wantWrote, wantReads)
		}
	}

	o = newOwnedObjects(owned, live)
	w, r := pass(desired("a"))
	check("a new object", w, r, true, 0)
	w, r = pass(desired("a"))
	check("the same desired object again", w, r, false, 0)

	// Another manager changes the field the operator sets.
	edited := desired("edited")
	edited.TypeMeta = metav1.TypeMeta{}
	if err := cl.Update(ctx, withVersion(t, cl, edited)); err != nil {
		t.Fatal(err)
	}
	// The edit's watch event queues the Plugin: its pass comes once the
	// cache has seen the edit.
	testutil.Eventually(t, 30*time.Second, "the owned cache at the edit's version", func() (bool, string) {
		rv, _, err := o.metadata(ctx, corev1.SchemeGroupVersion.WithKind("ConfigMap"), edited.Name)
		return err == nil && rv == edited.ResourceVersion, rv + " want " + edited.ResourceVersion
	})
	w, r = pass(desired("a"))
	check("after another manager's edit", w, r, true, 1)
	w, r = pass(desired("a"))
	check("after the edit was applied away", w, r, false, 0)

	o = newOwnedObjects(owned, live) // a restarted operator
	w, r = pass(desired("a"))
	check("a restarted operator", w, r, false, 1)
	w, r = pass(desired("b"))
	check("a new desired object at a known version", w, r, true, 0)

	// An object without the plugin label is not the owned cache's.
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-a-plugins", Namespace: plugins.Namespace}}
	if err := cl.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // what the cache would have seen by now
	if _, found, err := o.metadata(ctx, corev1.SchemeGroupVersion.WithKind("ConfigMap"), plain.Name); err != nil || found {
		t.Errorf("the owned cache holds a ConfigMap without the plugin label (found %v, %v)", found, err)
	}
	// And the owned cache is never read whole: such a read would start an
	// informer of every plugin's objects.
	if err := o.cache.Get(ctx, client.ObjectKeyFromObject(desired("b")), &corev1.ConfigMap{}); err == nil {
		t.Error("a typed read of the owned cache was answered")
	}
}

// withVersion is obj with the resource version the API server has now.
func withVersion(t *testing.T, cl client.Client, obj *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	var now corev1.ConfigMap
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), &now); err != nil {
		t.Fatal(err)
	}
	obj.ResourceVersion = now.ResourceVersion
	return obj
}
