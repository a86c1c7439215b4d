//go:build cluster

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// openfief runs one CLI command in this process against the platform and
// fails the test unless it exits with want.
func openfief(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	full := append([]string{"--kubeconfig", stack.KubeconfigPath}, args...)
	code := cli.Main(context.Background(), full, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	t.Logf("$ openfief %s\n%s", strings.Join(args, " "), out.String())
	if code != want {
		t.Fatalf("openfief %s exited %d, want %d:\n%s", strings.Join(args, " "), code, want, out.String())
	}
	return out.String()
}

// kube is an admin client of the platform's API server.
func kube(t *testing.T) client.Client {
	t.Helper()
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(stack.Cluster.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get reads the object of the plugin's workload into obj; false when absent.
func get(t *testing.T, c client.Client, plugin string, obj client.Object) bool {
	t.Helper()
	err := c.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(plugin)}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// allowList is the plugin's entry in the allow-list ConfigMap.
func allowList(t *testing.T, c client.Client, plugin string) (string, bool) {
	t.Helper()
	var cm corev1.ConfigMap
	err := c.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.AllowListConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	v, ok := cm.Data[plugin]
	return v, ok
}

// waitTimeout bounds every wait for the platform to act.
const waitTimeout = 60 * time.Second

// clientKey names an object in openfief.
func clientKey(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: plugins.Namespace, Name: name}
}
