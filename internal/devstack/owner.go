package devstack

import (
	"context"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// installOwner applies the owner's ServiceAccount and Role from deploy/core
// of the source tree (OF-18): the in-process core takes only a token of
// that ServiceAccount on its owner API, as an installed core does, and the
// CLI mints one with the env file's kubeconfig. That kubeconfig is the
// admin's, who may create the token without the Role being bound; the Role
// is there so that a kubeconfig of a lesser user can be given it.
func (s *Stack) installOwner(ctx context.Context) error {
	root, err := sourceRoot()
	if err != nil {
		return err
	}
	objs, err := deploy.Render(filepath.Join(root, "deploy", "core"))
	if err != nil {
		return err
	}
	cl, err := client.New(s.Cluster.Config, client.Options{})
	if err != nil {
		return err
	}
	applied := 0
	for _, u := range objs {
		if (u.GetKind() != "ServiceAccount" && u.GetKind() != "Role") || u.GetName() != ownerapi.ServiceAccount {
			continue
		}
		if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("openfief-dev"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s of deploy/core: %w", u.GetKind(), u.GetName(), err)
		}
		applied++
	}
	if applied != 2 {
		return fmt.Errorf("deploy/core holds %d of the owner's ServiceAccount and Role %s, want both", applied, ownerapi.ServiceAccount)
	}
	return nil
}
