package check

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestTrustRoot(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	admin := &corev1.ConfigMap{Data: map[string]string{"timestamp.json": "{}"}}
	fp := plugins.TrustRootFingerprint(admin.Data)
	other := strings.Repeat("cd", 32)
	status := func(s plugins.TrustRootStatus) *corev1.ConfigMap {
		raw, err := plugins.EncodeTrustRootStatus(s)
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{Data: map[string]string{plugins.TrustRootStatusKey: raw}}
	}
	embedded := plugins.TrustRootStatus{Source: plugins.TrustRootEmbedded, SHA256: digest}
	fromCM := plugins.TrustRootStatus{Source: plugins.TrustRootFromConfigMap, SHA256: digest, ConfigMap: fp, RootVersion: 15, TargetsVersion: 9}
	refused := embedded
	refused.Refused = &plugins.TrustRootRefusal{ConfigMap: fp, Reason: "trust root refused: 15.root.json: unsigned metadata error"}
	stale := fromCM
	stale.ConfigMap = other
	for name, tc := range map[string]struct {
		admin     *corev1.ConfigMap
		adminErr  error
		status    *corev1.ConfigMap
		statusErr error
		want      Status
		reason    string
	}{
		"embedded": {adminErr: notFound, status: status(embedded), want: OK,
			reason: "the root embedded in this release (trusted_root.json sha256 " + digest + ")"},
		"the admin's": {admin: admin, status: status(fromCM), want: OK,
			reason: "the root of ConfigMap openfief-sigstore-root, TUF root version 15, targets version 9 (trusted_root.json sha256 " + digest + ")"},
		"refused": {admin: admin, status: status(refused), want: Fail,
			reason: "the operator refused ConfigMap openfief-sigstore-root: trust root refused: 15.root.json: unsigned metadata error; it keeps using the root embedded in this release (trusted_root.json sha256 " + digest + ")"},
		"not taken yet":    {admin: admin, status: status(stale), want: Warn},
		"deleted, in use":  {adminErr: notFound, status: status(fromCM), want: Warn},
		"no status":        {adminErr: notFound, statusErr: notFound, want: Fail, reason: "ConfigMap openfief/openfief-sigstore-root-status not found"},
		"status hidden":    {adminErr: notFound, statusErr: forbiddenErr, want: Fail},
		"admin's hidden":   {adminErr: forbiddenErr, status: status(embedded), want: Fail},
		"status not valid": {adminErr: notFound, status: &corev1.ConfigMap{Data: map[string]string{plugins.TrustRootStatusKey: `{"source":"web"}`}}, want: Fail},
	} {
		t.Run(name, func(t *testing.T) {
			got := TrustRoot(tc.admin, tc.adminErr, tc.status, tc.statusErr)
			if got.Status != tc.want || (tc.reason != "" && got.Reason != tc.reason) {
				t.Errorf("got %s %q, want %s %q", got.Status, got.Reason, tc.want, tc.reason)
			}
			if got.Status != OK && got.Hint == "" {
				t.Errorf("a %s without a hint: %+v", got.Status, got)
			}
			if got.Group != GroupRuntime || got.Name != TrustRootName {
				t.Errorf("group %q name %q", got.Group, got.Name)
			}
		})
	}
}
