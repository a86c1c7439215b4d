//go:build cluster

package devcluster_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// syncBuffer is a bytes.Buffer that several processes' output copiers may
// write at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TestOutputKeepsServing starts a cluster whose output is also copied to a
// writer (as `make cluster` and `openfief dev` do) and checks that the API
// server keeps serving once Start returned. Closing the log files at the end
// of Start broke envtest's output pipe, and the next line the API server
// logged killed it with SIGPIPE.
func TestOutputKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane of its own")
	}
	c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Minimal, Output: &syncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	// Creating and deleting namespaces makes the API server log; before the
	// fix it died within the first ten rounds.
	for i := range 30 {
		name := fmt.Sprintf("output-%d", i)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s after start: %v", name, err)
		}
		if err := cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete namespace %s after start: %v", name, err)
		}
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("API server after start: %v", err)
	}
}
