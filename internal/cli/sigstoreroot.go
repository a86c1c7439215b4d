package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/root"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// sigstoreRootFromCluster is the Sigstore root the commands that write to
// the cluster verify keyless signatures with, as the operator does: the
// admin's ConfigMap openfief-sigstore-root, verified offline from this
// binary's embedded root through the TUF root-rotation chain
// (cosign.TrustRoot.Update), or the embedded root when there is none. It
// returns nil material for the embedded root, and a note for the report
// ("" when there is no ConfigMap). Content that does not verify is not
// used: the embedded root is, and the note says why (the operator keeps
// the root it had, which the CLI cannot know).
func (e *Env) sigstoreRootFromCluster(ctx context.Context, c client.Reader) (root.TrustedMaterial, string, error) {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: plugins.TrustRootConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case err != nil:
		return nil, "", exitf(ExitFailure, "reading the Sigstore root: %w", err)
	case len(cm.Data) == 0:
		return nil, "", nil
	}
	start, err := e.sigstoreRootStart()
	if err != nil {
		return nil, "", exitf(ExitFailure, "this CLI's embedded Sigstore root: %w", err)
	}
	files, err := plugins.ParseTrustRootFiles(cm.Data)
	var next cosign.TrustRoot
	if err == nil {
		next, err = start.Update(files, plugins.TrustRootFingerprint(cm.Data), e.Now())
	}
	if err != nil {
		return nil, fmt.Sprintf("the embedded Sigstore root: ConfigMap %s did not verify: %s", plugins.TrustRootConfigMap,
			plugins.SafeReason(strings.ReplaceAll(err.Error(), "\n", "; "), plugins.MaxTrustRootReason)), nil
	}
	s := next.Status
	return next.Material, fmt.Sprintf("the Sigstore root of ConfigMap %s, TUF root version %d, targets version %d, trusted_root.json sha256 %s",
		plugins.TrustRootConfigMap, s.RootVersion, s.TargetsVersion, s.SHA256), nil
}

// sigstoreRootStart is the root Update starts from: this binary's
// embedded one, or a test's.
func (e *Env) sigstoreRootStart() (cosign.TrustRoot, error) {
	if e.trustRootStart != nil {
		return *e.trustRootStart, nil
	}
	return cosign.EmbeddedTrustRoot()
}
