package trust

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestPolicyVerifierWithRealSignatures checks images in an in-process
// registry, signed with real keys in cosign v3's bundle format.
func TestPolicyVerifierWithRealSignatures(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	owner := cosigntest.NewKey(t)
	// A keyless signer the policy does not trust: its signature verifies,
	// its identity is not trusted. (A key nobody trusts verifies nothing, so
	// an image signed only with one reads as unsigned.)
	stranger := cosigntest.NewKeyless(t, "https://accounts.example.com", "mallory@example.com")
	manifest := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}

	signed := reg.PushImage(t, "plugins/nbp-fx", cosigntest.ManifestLabel(t, manifest))
	reg.Sign(t, signed, owner)
	foreign := reg.PushImage(t, "plugins/other", cosigntest.ManifestLabel(t, manifest))
	reg.Sign(t, foreign, stranger)
	unsigned := reg.PushImage(t, "plugins/unsigned", cosigntest.ManifestLabel(t, manifest))

	policy := ownerPolicy(t, owner.SignersJSON(t, "owner"))
	images, err := cosign.NewVerifier(cosign.WithPublicKeys(policy.PublicKeys()),
		cosign.WithTrustedMaterial(stranger.VS), cosign.WithSCTRequired(false))
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(images, policy)
	ctx := context.Background()

	got := v.Check(ctx, signed, &manifest)
	if got.Status != metav1.ConditionTrue || got.Reason != v1alpha1.ReasonSignedByTrustedSigner || got.Signer != "owner" {
		t.Fatalf("signed image: %+v", got)
	}
	requests := reg.Requests()
	if again := v.Check(ctx, signed, &manifest); again != got || reg.Requests() != requests {
		t.Errorf("second check of a signed digest read the registry again (%d requests) or changed: %+v", reg.Requests()-requests, again)
	}

	other := manifest
	other.Egress = []string{"api.nbp.pl", "evil.example.com"}
	if got := v.Check(ctx, signed, &other); got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonManifestMismatch {
		t.Errorf("declared manifest differing from the label: %+v", got)
	}
	if got := v.Check(ctx, foreign, &manifest); got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonUntrustedSigner {
		t.Errorf("image signed by a stranger: %+v", got)
	}

	got = v.Check(ctx, unsigned, &manifest)
	if got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonUnsigned || strings.Contains(got.Message, "attached") {
		t.Errorf("unsigned image: %+v, want Unsigned with no signature said to be attached", got)
	}
	requests = reg.Requests()
	v.Check(ctx, unsigned, &manifest)
	if reg.Requests() == requests {
		t.Error("an unsigned result was cached")
	}

	reg.Close()
	if got := v.Check(ctx, unsigned, &manifest); got.Status != metav1.ConditionUnknown || got.Reason != v1alpha1.ReasonRegistryUnavailable {
		t.Errorf("unreachable registry: %+v", got)
	}
	if got := v.Check(ctx, signed, &manifest); got.Status != metav1.ConditionTrue {
		t.Errorf("a cached signed image must stay verified through an outage: %+v", got)
	}
}

// countingImages is a cosign.ImageVerifier that signs everything with one
// key identity, counts calls and can be slowed down.
type countingImages struct {
	calls atomic.Int64
	delay time.Duration
}

func (c *countingImages) Verify(_ context.Context, ref plugins.ImageRef) (plugins.SignedImage, cosign.Report, error) {
	c.calls.Add(1)
	time.Sleep(c.delay)
	return plugins.SignedImage{Image: ref, Signatures: []plugins.SignatureIdentity{{Issuer: "https://token.actions.githubusercontent.com", Subject: plugins.OpenFiefCI().Identity.Subject}}}, cosign.Report{}, nil
}

// ciPolicy trusts only what the embedded catalog does: OpenFief's CI.
func ciPolicy(t *testing.T) plugins.TrustPolicy {
	t.Helper()
	return ownerPolicy(t, nil)
}

// ownerPolicy is the trust policy of an empty catalog and the owner's
// signers.json (none when nil).
func ownerPolicy(t testing.TB, signersJSON []byte) plugins.TrustPolicy {
	t.Helper()
	var signers []plugins.Signer
	if signersJSON != nil {
		var err error
		if signers, err = plugins.ParseOwnerSigners(signersJSON); err != nil {
			t.Fatal(err)
		}
	}
	p, err := plugins.NewTrustPolicy(plugins.Catalog{}, signers)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyVerifierCoalescesConcurrentChecks(t *testing.T) {
	images := &countingImages{delay: 200 * time.Millisecond}
	v := NewPolicyVerifier(images, ciPolicy(t))
	ref, _ := plugins.ParseImageRef(testutil.Image("coalesce"))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := v.Check(context.Background(), ref, nil); !got.Verified() {
				t.Errorf("check: %+v", got)
			}
		}()
	}
	wg.Wait()
	if n := images.calls.Load(); n != 1 {
		t.Errorf("16 concurrent checks of one image made %d registry rounds, want 1", n)
	}
}

// TestPolicyVerifierCacheIsBounded: the signed-image cache holds at most
// maxSignedImages and drops the least recently checked image first, so an
// image checked again and again stays while others come and go.
func TestPolicyVerifierCacheIsBounded(t *testing.T) {
	images := &countingImages{}
	v := NewPolicyVerifier(images, ciPolicy(t))
	ref := func(i int) plugins.ImageRef {
		r, err := plugins.ParseImageRef(testutil.Image(fmt.Sprint("bound-", i)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(i int) int64 {
		before := images.calls.Load()
		v.Check(context.Background(), ref(i), nil)
		return images.calls.Load() - before
	}
	for i := range maxSignedImages {
		check(i)
		check(0) // image 0 stays the most recently checked
	}
	if n := v.state.Load().cache.Len(); n != maxSignedImages {
		t.Fatalf("cache holds %d images, want %d", n, maxSignedImages)
	}
	if calls := check(maxSignedImages); calls != 1 {
		t.Errorf("a new image made %d registry rounds, want 1", calls)
	}
	if n := v.state.Load().cache.Len(); n != maxSignedImages {
		t.Errorf("after one more image the cache holds %d, want %d", n, maxSignedImages)
	}
	if calls := check(0); calls != 0 {
		t.Errorf("the most recently checked image was dropped: %d registry rounds", calls)
	}
	if calls := check(1); calls != 1 {
		t.Errorf("the least recently checked image was kept: %d registry rounds, want 1", calls)
	}
}

// TestPolicyVerifierKeylessPattern trusts a keyless owner signer by an RE2
// subject pattern, and refuses an image of that signer that carries no
// manifest label when a manifest is declared.
func TestPolicyVerifierKeylessPattern(t *testing.T) {
	reg := cosigntest.NewRegistry(t, false) // the sha256-<hex> tag fallback
	ci := cosigntest.NewKeyless(t, "https://token.actions.githubusercontent.com",
		"https://github.com/example/fx/.github/workflows/release.yml@refs/tags/v1.2.0")
	manifest := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}}
	sign := func(ref plugins.ImageRef) {
		reg.Sign(t, ref, ci)
	}
	labelled := reg.PushImage(t, "fx", cosigntest.ManifestLabel(t, manifest))
	sign(labelled)
	bare := reg.PushImage(t, "fx", nil)
	sign(bare)

	policy := ownerPolicy(t, []byte(`{"signers":[{"name":"fx-releases",
		"issuer":"https://token.actions.githubusercontent.com",
		"subjectPattern":"https://github.com/example/fx/\\.github/workflows/release\\.yml@refs/tags/v[0-9.]+"}]}`))
	images, err := cosign.NewVerifier(cosign.WithTrustedMaterial(ci.VS), cosign.WithSCTRequired(false))
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(images, policy)
	if got := v.Check(context.Background(), labelled, &manifest); !got.Verified() || got.Signer != "fx-releases" {
		t.Errorf("signed by a subject matching the pattern: %+v", got)
	}
	if got := v.Check(context.Background(), bare, &manifest); got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonManifestMismatch {
		t.Errorf("signed image without a label: %+v, want ManifestMismatch", got)
	}
}

// BenchmarkPolicyVerifier compares a check that reads the registry (the
// in-process registry on loopback, a key-signed bundle) with one served from
// the signed-image cache.
func BenchmarkPolicyVerifier(b *testing.B) {
	reg := cosigntest.NewRegistry(b, true)
	key := cosigntest.NewKey(b)
	manifest := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}
	ref := reg.PushImage(b, "fx", cosigntest.ManifestLabel(b, manifest))
	reg.Sign(b, ref, key)
	policy := ownerPolicy(b, key.SignersJSON(b, "owner"))
	images, err := cosign.NewVerifier(cosign.WithPublicKeys(policy.PublicKeys()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("uncached", func(b *testing.B) {
		before := reg.Requests()
		for b.Loop() {
			v := NewPolicyVerifier(images, policy)
			if !v.Check(ctx, ref, &manifest).Verified() {
				b.Fatal("not verified")
			}
		}
		b.ReportMetric(float64(reg.Requests()-before)/float64(b.N), "requests/op")
	})
	b.Run("cached", func(b *testing.B) {
		v := NewPolicyVerifier(images, policy)
		v.Check(ctx, ref, &manifest)
		before := reg.Requests()
		for b.Loop() {
			if !v.Check(ctx, ref, &manifest).Verified() {
				b.Fatal("not verified")
			}
		}
		b.ReportMetric(float64(reg.Requests()-before)/float64(b.N), "requests/op")
	})
}
