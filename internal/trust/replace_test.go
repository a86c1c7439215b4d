package trust

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestPolicyVerifierSwapsPolicy checks live changes of the owner's signers
// with real signatures (OF-31): two images signed by owner keys A and B;
// narrowing to A refuses B's image as UntrustedSigner from the cache (no
// registry round), while A's stays verified; replacing with A and B again
// reads B's image afresh and admits it; a fresh verifier that never knew B
// finds B's image unsigned, which is why narrowing keeps the cache, and says
// that a signature it could not verify is attached.
func TestPolicyVerifierSwapsPolicy(t *testing.T) {
	reg := cosigntest.NewRegistry(t, false)
	a, b := cosigntest.NewKey(t), cosigntest.NewKey(t)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	refA := reg.PushImage(t, "plugins/a", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, refA, a)
	refB := reg.PushImage(t, "plugins/b", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, refB, b)

	both := ownerPolicy(t, []byte(fmt.Sprintf(`{"signers":[{"name":"a","publicKey":%q},{"name":"b","publicKey":%q}]}`, a.PublicKeyPEM(t), b.PublicKeyPEM(t))))
	onlyA := ownerPolicy(t, a.SignersJSON(t, "a"))
	reader := func(p plugins.TrustPolicy) *cosign.Verifier {
		t.Helper()
		v, err := NewImageVerifier(p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ctx := context.Background()
	v := NewPolicyVerifier(reader(both), both)
	for _, ref := range []plugins.ImageRef{refA, refB} {
		if got := v.Check(ctx, ref, &m); !got.Verified() {
			t.Fatalf("%s under A and B: %+v", ref, got)
		}
	}

	v.Narrow(reader(onlyA), onlyA)
	requests := reg.Requests()
	if got := v.Check(ctx, refB, &m); got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonUntrustedSigner {
		t.Errorf("B's image after B was removed: %+v", got)
	}
	if got := v.Check(ctx, refA, &m); !got.Verified() || got.Signer != "a" {
		t.Errorf("A's image after B was removed: %+v", got)
	}
	if n := reg.Requests() - requests; n != 0 {
		t.Errorf("narrowing read the registry %d times", n)
	}

	fresh := NewPolicyVerifier(reader(onlyA), onlyA)
	// It still tells the owner that a signature is there.
	const said = "; 1 signature attached to it did not verify with the trusted signers' keys and certificates: it may be signed by a signer not trusted here"
	if got := fresh.Check(ctx, refB, &m); got.Reason != v1alpha1.ReasonUnsigned || !strings.HasSuffix(got.Message, said) {
		t.Errorf("B's image read with A's key only: %+v, want Unsigned ending %q", got, said)
	}

	v.Replace(reader(both), both)
	requests = reg.Requests()
	if got := v.Check(ctx, refB, &m); !got.Verified() || got.Signer != "b" {
		t.Errorf("B's image after B was added back: %+v", got)
	}
	if reg.Requests() == requests {
		t.Error("replacing kept the cache: B's image was not read again")
	}
}

// TestPolicyVerifierSwapUnderLoad swaps policies while checks run (go test
// -race finds a torn read): every check answers under one policy or the
// other, never a mix.
func TestPolicyVerifierSwapUnderLoad(t *testing.T) {
	reg := cosigntest.NewRegistry(t, false)
	a := cosigntest.NewKey(t)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}
	ref := reg.PushImage(t, "plugins/a", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, ref, a)
	withA := ownerPolicy(t, a.SignersJSON(t, "a"))
	none := ownerPolicy(t, nil)
	imgA, err := NewImageVerifier(withA)
	if err != nil {
		t.Fatal(err)
	}
	imgNone, err := NewImageVerifier(none)
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(imgA, withA)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got := v.Check(context.Background(), ref, &m)
				switch got.Reason {
				case v1alpha1.ReasonSignedByTrustedSigner, v1alpha1.ReasonUntrustedSigner, v1alpha1.ReasonUnsigned:
				default:
					t.Errorf("worker %d: %+v", w, got)
				}
			}
		}()
	}
	for i := range 50 {
		if i%2 == 0 {
			v.Narrow(imgNone, none)
		} else {
			v.Replace(imgA, withA)
		}
	}
	wg.Wait()
	v.Replace(imgA, withA)
	if got := v.Check(context.Background(), ref, &m); !got.Verified() {
		t.Errorf("after the last swap: %+v", got)
	}
}
