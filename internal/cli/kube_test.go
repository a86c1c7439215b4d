//go:build cluster

package cli

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// newKube returns the package's shared control plane (built with `-tags
// cluster`) with the openfief namespace in place.
func newKube(t *testing.T) *kube {
	t.Helper()
	cl := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{testutil.CRDDir()}})
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cl.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plugins.Namespace}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return &kube{kubeconfig: cl.KubeconfigPath, c: c}
}
