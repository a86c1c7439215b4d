//go:build cluster

package devcluster_test

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// sharedNodeOptions are the options of the package's shared real node: the
// union of what its tests need (the cluster DNS, one pre-made volume), with
// room for CoreDNS to start too. They are made once: the first test to ask
// starts the node.
var sharedNodeOptions = sync.OnceValue(func() devcluster.Options {
	return devcluster.Options{
		Mode:         devcluster.Full,
		Node:         devcluster.NodeReal,
		ClusterDNS:   true,
		Volumes:      1,
		StartTimeout: 3 * time.Minute,
		Output:       sharedNodeOutput(),
	}
})

// probeImages holds the probe image pushed to each node's registry.
var probeImages struct {
	mu   sync.Mutex
	refs map[string]string
}

// sharedNode returns the package's shared real node (devcluster.Shared,
// started on first use, stopped and checked for leftovers by TestMain), a
// client, the probe image in the node's registry, and a namespace of the
// test's own, named after it, which enforces the restricted Pod Security
// Standard and is deleted when the test ends, so that what a test leaves
// (policies, pods, claims) does not reach the next.
func sharedNode(t *testing.T) (c *devcluster.Cluster, cs kubernetes.Interface, image, ns string) {
	t.Helper()
	skipUnlessRealNode(t)
	start := time.Now()
	c = devcluster.Shared(t, sharedNodeOptions())
	t.Logf("shared real node ready in %v (state in %s)", time.Since(start).Round(time.Millisecond), c.NodeStateDir())
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	probeImages.mu.Lock()
	if probeImages.refs == nil {
		probeImages.refs = map[string]string{}
	}
	image, ok := probeImages.refs[c.NodeRegistry()]
	if !ok {
		image = pushProbe(t, c.NodeRegistry())
		probeImages.refs[c.NodeRegistry()] = image
	}
	probeImages.mu.Unlock()
	ns = namespaceFor(t.Name())
	createProbeNamespace(t, cs, ns)
	t.Cleanup(func() { deleteNamespace(t, cs, ns) })
	return c, cs, image, ns
}

// namespaceFor names a test's namespace after the test:
// TestRealNodeClusterDNS's is cluster-dns.
func namespaceFor(test string) string {
	name := []rune(strings.TrimPrefix(test, "TestRealNode"))
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) &&
			(unicode.IsLower(name[i-1]) || i+1 < len(name) && unicode.IsLower(name[i+1])) {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// deleteNamespace deletes namespace ns and waits (at most 2 minutes) until
// it is gone, with its pods off the node.
func deleteNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	// The test's context is over by now.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	// Its pods first, at once: the probes hold no state worth a grace
	// period, and the namespace waits for each pod's 30 s otherwise.
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the pods of namespace %s: %v", ns, err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting namespace %s: %v", ns, err)
		return
	}
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("namespace %s not gone: %v", ns, err)
		return
	}
	t.Logf("namespace %s deleted in %v", ns, time.Since(start).Round(time.Millisecond))
}

// sharedNodeOutput is where the shared node's processes write besides their
// logs: OPENFIEF_NODE_LOG's file with ".shared" appended, for debugging, or
// nowhere. It stays open as long as the node runs, past any one test.
func sharedNodeOutput() io.Writer {
	p := os.Getenv("OPENFIEF_NODE_LOG")
	if p == "" {
		return nil
	}
	f, err := os.Create(p + ".shared")
	if err != nil {
		return nil
	}
	return f
}
