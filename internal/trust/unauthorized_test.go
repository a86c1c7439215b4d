package trust

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// TestPolicyVerifierRegistryUnauthorized checks that a registry refusing the
// read (401, 403) is SignatureVerified=Unknown/RegistryUnauthorized, and any
// other registry failure stays RegistryUnavailable.
func TestPolicyVerifierRegistryUnauthorized(t *testing.T) {
	for _, tc := range []struct {
		status int
		reason string
	}{
		{http.StatusUnauthorized, v1alpha1.ReasonRegistryUnauthorized},
		{http.StatusForbidden, v1alpha1.ReasonRegistryUnauthorized},
		{http.StatusInternalServerError, v1alpha1.ReasonRegistryUnavailable},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
				}
				http.Error(w, `{"errors":[{"code":"DENIED","message":"secret body"}]}`, tc.status)
			}))
			defer srv.Close()
			ref, err := plugins.ParseImageRef(strings.TrimPrefix(srv.URL, "http://") + "/plugins/fx@sha256:" + strings.Repeat("ab", 32))
			if err != nil {
				t.Fatal(err)
			}
			images, err := cosign.NewVerifier()
			if err != nil {
				t.Fatal(err)
			}
			got := NewPolicyVerifier(images, ciPolicy(t)).Check(context.Background(), ref, nil)
			if got.Status != metav1.ConditionUnknown || got.Reason != tc.reason || got.Verified() {
				t.Fatalf("Check = %+v, want Unknown/%s", got, tc.reason)
			}
			if strings.Contains(got.Message, "secret body") {
				t.Errorf("the message quotes the registry's body: %q", got.Message)
			}
			if tc.reason != v1alpha1.ReasonRegistryUnauthorized {
				return
			}
			for _, want := range []string{"refused the read of " + ref.String(), "--registry-config"} {
				if !strings.Contains(got.Message, want) {
					t.Errorf("message %q lacks %q", got.Message, want)
				}
			}
		})
	}
}
