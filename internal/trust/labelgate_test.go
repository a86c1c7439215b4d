package trust

import (
	"context"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestUntrustedSignerLabelNeverRead is the second half of a regression
// test: an image signed by an identity no policy trusts
// made Verify parse its label before the trust decision. With the verifier
// NewImageVerifier builds, such an image's config (where the label lives)
// is never fetched, however hostile its label, while a trusted signer's
// image is read as before.
func TestUntrustedSignerLabelNeverRead(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	owner := cosigntest.NewKey(t)
	stranger := cosigntest.NewKeyless(t, "https://accounts.example.com", "mallory@example.com")
	hostile := map[string]string{plugins.ManifestLabel: `{"configSchema":` + strings.Repeat(`[`, 200<<10)}
	foreign := reg.PushImage(t, "plugins/hostile", hostile)
	reg.Sign(t, foreign, stranger)
	manifest := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	signed := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, manifest))
	reg.Sign(t, signed, owner)

	policy := ownerPolicy(t, owner.SignersJSON(t, "owner"))
	images, err := NewImageVerifier(policy, cosign.WithTrustedMaterial(stranger.VS), cosign.WithSCTRequired(false))
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(images, policy)

	config := reg.ConfigDigest(t, foreign)
	before := len(reg.Paths())
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	allocBefore := ms.TotalAlloc
	got := v.Check(context.Background(), foreign, nil)
	runtime.ReadMemStats(&ms)
	if got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonUntrustedSigner {
		t.Fatalf("image signed by a stranger: %+v", got)
	}
	for _, p := range reg.Paths()[before:] {
		if strings.HasSuffix(p, "/blobs/"+config) {
			t.Errorf("the untrusted image's config was read: %s", p)
		}
	}
	if alloc := ms.TotalAlloc - allocBefore; alloc > 16<<20 {
		t.Errorf("checking the untrusted image allocated %d MiB", alloc>>20)
	}

	if got := v.Check(context.Background(), signed, &manifest); got.Status != metav1.ConditionTrue {
		t.Fatalf("image signed by the owner: %+v", got)
	}
}
