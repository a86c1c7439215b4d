package check

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TrustRootName is the name of the Sigstore root check.
const TrustRootName = "sigstore root"

// TrustRoot decides which Sigstore root the operator verifies keyless
// signatures with, as it publishes in openfief-sigstore-root-status, and
// whether that is what the admin's ConfigMap openfief-sigstore-root asks
// for: its source and the digest of its trusted_root.json when it is; a
// failure with the operator's reason when it refused the ConfigMap's
// content (the root in use stays, and is named too); a warning while the
// operator has not taken the current content yet.
func TrustRoot(admin *corev1.ConfigMap, adminErr error, status *corev1.ConfigMap, statusErr error) Result {
	n := TrustRootName
	restart := "the operator publishes it at start and on every change of ConfigMap " + plugins.TrustRootConfigMap +
		": check that openfief-operator runs (kubectl -n " + plugins.Namespace + " logs deploy/openfief-operator)"
	fix := "copy the files again from the TUF repository, as docs/operations.md (Renewing the Sigstore trust root) shows, " +
		"or delete ConfigMap " + plugins.TrustRootConfigMap + " to use this release's embedded root"
	switch {
	case apierrors.IsNotFound(statusErr):
		return fail(GroupRuntime, n, "ConfigMap "+plugins.Namespace+"/"+plugins.TrustRootStatusConfigMap+" not found", restart)
	case statusErr != nil:
		return fail(GroupRuntime, n, "cannot read ConfigMap "+plugins.TrustRootStatusConfigMap+": "+statusErr.Error(), "you need get on configmaps in namespace "+plugins.Namespace)
	case adminErr != nil && !apierrors.IsNotFound(adminErr):
		return fail(GroupRuntime, n, "cannot read ConfigMap "+plugins.TrustRootConfigMap+": "+adminErr.Error(), "you need get on configmaps in namespace "+plugins.Namespace)
	}
	s, err := plugins.ParseTrustRootStatus([]byte(status.Data[plugins.TrustRootStatusKey]))
	if err != nil {
		return fail(GroupRuntime, n, "ConfigMap "+plugins.TrustRootStatusConfigMap+" is not valid: "+err.Error(), restart)
	}
	var data map[string]string
	if adminErr == nil && admin != nil {
		data = admin.Data
	}
	fp := plugins.TrustRootFingerprint(data)
	inUse := describeTrustRoot(s)
	switch {
	case fp == "" && s.Source == plugins.TrustRootEmbedded:
		return ok(GroupRuntime, n, inUse)
	case fp == "":
		return warn(GroupRuntime, n, "ConfigMap "+plugins.TrustRootConfigMap+" is gone, and the operator still uses "+inUse,
			"it returns to the embedded root when it sees the deletion; if it stays, "+restart)
	case s.Refused != nil && s.Refused.ConfigMap == fp:
		return fail(GroupRuntime, n, "the operator refused ConfigMap "+plugins.TrustRootConfigMap+": "+s.Refused.Reason+"; it keeps using "+inUse, fix)
	case s.Source == plugins.TrustRootFromConfigMap && s.ConfigMap == fp:
		return ok(GroupRuntime, n, inUse)
	}
	return warn(GroupRuntime, n, "the operator has not taken the current content of ConfigMap "+plugins.TrustRootConfigMap+" yet; it uses "+inUse,
		"run the check again in a few seconds; if it stays, "+restart)
}

// describeTrustRoot names the root in use: where it came from and the
// sha256 of its trusted_root.json.
func describeTrustRoot(s plugins.TrustRootStatus) string {
	if s.Source == plugins.TrustRootEmbedded {
		return "the root embedded in this release (trusted_root.json sha256 " + s.SHA256 + ")"
	}
	return fmt.Sprintf("the root of ConfigMap %s, TUF root version %d, targets version %d (trusted_root.json sha256 %s)",
		plugins.TrustRootConfigMap, s.RootVersion, s.TargetsVersion, s.SHA256)
}
