package cli

import (
	"context"
	"errors"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// ownerToken mints the owner's credential for openfief-core's owner API
// (OF-18): a TokenRequest token of the ServiceAccount openfief-owner in the
// namespace, for the audience openfief-core-owner, lasting ten minutes. It
// is asked for with the kubeconfig's own identity, so whoever may create
// tokens for that ServiceAccount (the Role openfief-owner of deploy/core)
// may act as the owner. The token is used for one command and never
// printed; errors never hold it.
func (e *Env) ownerToken(ctx context.Context) (string, error) {
	cfg, err := e.RESTConfig()
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", exitf(ExitFailure, "connecting to the API server: %w", err)
	}
	exp := int64(ownerapi.TokenSeconds)
	tr, err := cs.CoreV1().ServiceAccounts(e.Namespace).CreateToken(ctx, ownerapi.ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{ownerapi.Audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return "", exitf(ExitFailure, "you may not create tokens for serviceaccount %s/%s, the owner's credential for openfief-core: "+
			"ask the cluster admin to bind Role %s (namespace %s) to you (docs/cli.md)", e.Namespace, ownerapi.ServiceAccount, ownerapi.OwnerRole, e.Namespace)
	case apierrors.IsNotFound(err):
		return "", exitf(ExitFailure, "serviceaccount %s/%s, the owner's credential for openfief-core, does not exist: "+
			"install openfief-core (kubectl apply -k deploy/core), which creates it", e.Namespace, ownerapi.ServiceAccount)
	case apierrors.IsUnauthorized(err):
		return "", exitf(ExitFailure, "the API server did not accept your kubeconfig's credentials while minting the owner's token: %w", err)
	case err != nil:
		return "", exitf(ExitFailure, "minting the owner's token (serviceaccount %s/%s): %w", e.Namespace, ownerapi.ServiceAccount, err)
	case tr.Status.Token == "":
		return "", exitf(ExitFailure, "minting the owner's token (serviceaccount %s/%s): %w", e.Namespace, ownerapi.ServiceAccount, errors.New("the API server returned no token"))
	}
	return tr.Status.Token, nil
}
