package platform

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// OperatorDeployment is the operator's Deployment in the platform's set.
const OperatorDeployment = "openfief-operator"

// OperatorPublications are the ConfigMaps the operator's leader writes as
// it starts, sorted: the egress allow-list, the ServiceAccount token keys
// and the Sigstore root's status. `openfief check` fails while one is
// missing, and the proxy and the core read the first two.
var OperatorPublications = []string{plugins.AllowListConfigMap, plugins.TokenKeysConfigMap, plugins.TrustRootStatusConfigMap}

// WaitPublished waits, when s runs the operator, until every ConfigMap of
// OperatorPublications exists. An operator pod is Available as soon as its
// process answers, which is before it leads and has written them; an
// install that stopped at Available left `openfief check` failing for the
// first moments. It is bounded by ctx and, on timeout, names what is
// missing and where to look.
func WaitPublished(ctx context.Context, c client.Client, s *Set, out io.Writer) error {
	if !s.runsOperator() {
		return nil
	}
	said := false
	ticker := newTicker()
	defer ticker.stop()
	for {
		missing, err := unpublished(ctx, c)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil && len(missing) == 0 {
			if said {
				fmt.Fprintf(out, "Deployment %s/%s: published %s\n", plugins.Namespace, OperatorDeployment, strings.Join(OperatorPublications, ", "))
			}
			return nil
		}
		if !said && err == nil {
			said = true
			fmt.Fprintf(out, "waiting for Deployment %s/%s to lead and publish ConfigMap %s\n", plugins.Namespace, OperatorDeployment, strings.Join(missing, ", "))
		}
		if err := ticker.wait(ctx); err != nil {
			if len(missing) == 0 {
				missing = OperatorPublications
			}
			return fmt.Errorf("the operator (Deployment %s/%s) is Available but has not published ConfigMap %s: see kubectl -n %s logs deploy/%s (%w)",
				plugins.Namespace, OperatorDeployment, strings.Join(missing, ", "), plugins.Namespace, OperatorDeployment, err)
		}
	}
}

// unpublished names the OperatorPublications that do not exist yet, in
// their order.
func unpublished(ctx context.Context, c client.Client) ([]string, error) {
	var missing []string
	for _, name := range OperatorPublications {
		var cm corev1.ConfigMap
		switch err := c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &cm); {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case err != nil:
			return nil, fmt.Errorf("read ConfigMap %s/%s: %w", plugins.Namespace, name, err)
		}
	}
	return missing, nil
}

// runsOperator reports whether s holds the operator's Deployment.
func (s *Set) runsOperator() bool {
	for _, d := range s.Deployments() {
		if d.GetName() == OperatorDeployment && d.GetNamespace() == plugins.Namespace {
			return true
		}
	}
	return false
}
