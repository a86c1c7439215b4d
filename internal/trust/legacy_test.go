package trust

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestCheckLegacySignatureHint: an image that carries only a cosign
// signature in the legacy format is refused as unsigned, and the message
// (what the operator's condition and the CLI show) says what was found and
// how to sign again; an image with no signature at all gets no such hint.
func TestCheckLegacySignatureHint(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		reg := cosigntest.NewRegistry(t, referrers)
		owner := cosigntest.NewKey(t)
		m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
		legacy := reg.PushImage(t, "plugins/legacy", cosigntest.ManifestLabel(t, m))
		reg.SignLegacy(t, legacy)
		unsigned := reg.PushImage(t, "plugins/unsigned", cosigntest.ManifestLabel(t, m))

		policy := ownerPolicy(t, owner.SignersJSON(t, "owner"))
		images, err := NewImageVerifier(policy)
		if err != nil {
			t.Fatal(err)
		}
		v := NewPolicyVerifier(images, policy)

		got := v.Check(context.Background(), legacy, &m)
		if got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonUnsigned {
			t.Fatalf("referrers %v: legacy-signed image: %+v, want Unsigned", referrers, got)
		}
		for _, want := range []string{"legacy format", "sha256-<hex>.sig", "--new-bundle-format=false",
			"cosign sign --key cosign.key --tlog-upload=false --use-signing-config=false"} {
			if !strings.Contains(got.Message, want) {
				t.Errorf("referrers %v: message %q does not say %q", referrers, got.Message, want)
			}
		}
		if !strings.HasSuffix(got.Message, LegacySignatureHint) {
			t.Errorf("referrers %v: message %q does not end with the hint", referrers, got.Message)
		}

		got = v.Check(context.Background(), unsigned, &m)
		if got.Reason != v1alpha1.ReasonUnsigned || strings.Contains(got.Message, "legacy") {
			t.Errorf("referrers %v: unsigned image: %+v, want Unsigned without the legacy hint", referrers, got)
		}
	}
}
