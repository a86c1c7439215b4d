package cosign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

const (
	testIssuer  = "https://token.actions.githubusercontent.com"
	testSubject = "https://github.com/example/plugin/.github/workflows/release.yml@refs/heads/main"
)

// testManifest is the manifest the signed test images carry as their label.
var testManifest = plugins.Manifest{
	Capabilities: []plugins.Capability{"connector"},
	Egress:       []string{"api.example.com"},
}

// newVerifier builds a Verifier that trusts k's virtual Sigstore, without
// SCTs (it issues none), plus opts.
func newVerifier(t *testing.T, k *cosigntest.Keyless, opts ...Option) *Verifier {
	t.Helper()
	v, err := NewVerifier(append([]Option{WithTrustedMaterial(k.VS), WithSCTRequired(false), WithTimeout(20 * time.Second),
		withRetryBackoff(remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustVerify(t *testing.T, v *Verifier, ref plugins.ImageRef) (plugins.SignedImage, Report) {
	t.Helper()
	got, rep, err := v.Verify(context.Background(), ref)
	if err != nil {
		t.Fatalf("Verify(%s): %v", ref, err)
	}
	if got.Image != ref {
		t.Errorf("Image = %s, want %s", got.Image, ref)
	}
	return got, rep
}

func keylessID() plugins.SignatureIdentity {
	return plugins.SignatureIdentity{Issuer: testIssuer, Subject: testSubject}
}

// skippedReasons lists each skipped bundle as referrer digest -> sentinel.
func skippedReasons(t *testing.T, rep Report) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, s := range rep.Skipped {
		var sentinel error
		for _, e := range []error{ErrMalformedBundle, ErrUnverifiedBundle, ErrPredicateType, ErrTooManyReferrers} {
			if errors.Is(s.Reason, e) {
				sentinel = e
			}
		}
		if sentinel == nil {
			t.Errorf("skipped %s: reason %v wraps no known sentinel", s.Referrer, s.Reason)
		}
		out[s.Referrer] = sentinel
	}
	return out
}

func TestVerifyKeyless(t *testing.T) {
	for name, referrersAPI := range map[string]bool{"referrers API": true, "tag fallback": false} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, referrersAPI)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, testManifest))
			reg.Sign(t, ref, k)

			got, rep := mustVerify(t, newVerifier(t, k), ref)
			if diff := cmp.Diff([]plugins.SignatureIdentity{keylessID()}, got.Signatures); diff != "" {
				t.Errorf("Signatures (-want +got):\n%s", diff)
			}
			if got.Manifest == nil || !got.Manifest.Equal(testManifest) {
				t.Errorf("Manifest = %+v, want %+v", got.Manifest, testManifest)
			}
			if rep.Verified != 1 || len(rep.Skipped) != 0 || rep.Referrers != 1 {
				t.Errorf("Report = %+v, want 1 referrer, 1 verified, none skipped", rep)
			}
			// The path taken: the fallback tag is read only without the API.
			fallback := "GET /v2/plugins/fx/manifests/" + strings.Replace(ref.Digest(), ":", "-", 1)
			if read := slices.Contains(reg.Paths(), fallback); read == referrersAPI {
				t.Errorf("fallback tag read = %v with referrers API = %v; requests: %v", read, referrersAPI, reg.Paths())
			}
		})
	}
}

func TestVerifyRekorV1AndExpiredCertificate(t *testing.T) {
	// The virtual Sigstore's certificate is valid for ten minutes from when
	// it signs; the Rekor v1 integrated time is when the log saw it.
	for name, tc := range map[string]struct {
		logTime time.Duration
		signed  bool
	}{
		"logged while the certificate was valid": {logTime: 5 * time.Minute, signed: true},
		"logged after the certificate expired":   {logTime: 30 * time.Minute, signed: false},
	} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, true)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			ref := reg.PushImage(t, "plugins/fx", nil)
			stmt := cosigntest.Statement(t, ref.Digest(), plugins.SignPredicateType)
			referrer := reg.Attach(t, ref, k.BundleRekorV1At(t, stmt, time.Now().Add(tc.logTime)), plugins.SignPredicateType)

			got, rep := mustVerify(t, newVerifier(t, k), ref)
			if signed := len(got.Signatures) > 0; signed != tc.signed {
				t.Fatalf("signed = %v, want %v (report %+v)", signed, tc.signed, rep)
			}
			if !tc.signed {
				if diff := cmp.Diff(map[string]error{referrer.String(): ErrUnverifiedBundle}, skippedReasons(t, rep), cmp.Comparer(errorsSame)); diff != "" {
					t.Errorf("skipped (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func errorsSame(a, b error) bool { return a == b }

func TestVerifyKeySigned(t *testing.T) {
	signer := cosigntest.NewKey(t)
	other := cosigntest.NewKey(t)
	for name, tc := range map[string]struct {
		keys []string
		want []plugins.SignatureIdentity
	}{
		"trusted key, second of two": {
			keys: []string{other.PublicKeyPEM(t), signer.PublicKeyPEM(t)},
			want: []plugins.SignatureIdentity{{PublicKeyPEM: signer.PublicKeyPEM(t)}},
		},
		"only another key trusted": {keys: []string{other.PublicKeyPEM(t)}},
		"no key trusted":           {},
	} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, true)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, testManifest))
			referrer := reg.Sign(t, ref, signer)

			got, rep := mustVerify(t, newVerifier(t, k, WithPublicKeys(tc.keys)), ref)
			if diff := cmp.Diff(tc.want, got.Signatures); diff != "" {
				t.Errorf("Signatures (-want +got):\n%s", diff)
			}
			if tc.want == nil {
				if got.Manifest != nil {
					t.Errorf("Manifest = %+v for an unsigned image, want nil", got.Manifest)
				}
				if diff := cmp.Diff(map[string]error{referrer.String(): ErrUnverifiedBundle}, skippedReasons(t, rep), cmp.Comparer(errorsSame)); diff != "" {
					t.Errorf("skipped (-want +got):\n%s", diff)
				}
			} else if got.Manifest == nil {
				t.Error("Manifest = nil for a signed image with a label")
			}
		})
	}
}

func TestVerifySkipsBundlesThatDoNotCount(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, testManifest))
	otherRef := reg.PushImage(t, "plugins/fx", nil)
	good := k.Bundle(t, cosigntest.Statement(t, ref.Digest(), plugins.SignPredicateType))

	// A signature whose payload was changed after signing.
	tampered := strings.Replace(string(k.Bundle(t, cosigntest.Statement(t, ref.Digest(), plugins.SignPredicateType))),
		`"payload":"`, `"payload":"eyJ`, 1)
	want := map[string]error{
		reg.Attach(t, ref, bytes.Repeat([]byte(" "), MaxBundleBytes+1), plugins.SignPredicateType).String():                                                 ErrMalformedBundle,
		reg.Attach(t, ref, []byte("not a bundle"), plugins.SignPredicateType).String():                                                                      ErrMalformedBundle,
		reg.Attach(t, ref, []byte(tampered), plugins.SignPredicateType).String():                                                                            ErrUnverifiedBundle,
		reg.Attach(t, ref, k.Bundle(t, cosigntest.Statement(t, otherRef.Digest(), plugins.SignPredicateType)), plugins.SignPredicateType).String():          ErrUnverifiedBundle,
		reg.Attach(t, ref, k.Bundle(t, cosigntest.Statement(t, ref.Digest(), "https://slsa.dev/provenance/v1")), "https://slsa.dev/provenance/v1").String(): ErrPredicateType,
	}
	goodReferrer := reg.Attach(t, ref, good, plugins.SignPredicateType)

	got, rep := mustVerify(t, newVerifier(t, k), ref)
	if diff := cmp.Diff([]plugins.SignatureIdentity{keylessID()}, got.Signatures); diff != "" {
		t.Errorf("Signatures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, skippedReasons(t, rep), cmp.Comparer(errorsSame)); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if _, skipped := skippedReasons(t, rep)[goodReferrer.String()]; skipped || rep.Verified != 1 || rep.Referrers != 6 {
		t.Errorf("Report = %+v, want 6 referrers and the good one verified", rep)
	}
}

func TestVerifyCapsReferrers(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	ref := reg.PushImage(t, "plugins/fx", nil)
	for i := range MaxReferrers + 2 {
		reg.Attach(t, ref, []byte(fmt.Sprintf("junk %d", i)), plugins.SignPredicateType)
	}
	before := len(reg.Paths())
	got, rep := mustVerify(t, newVerifier(t, k), ref)
	if len(got.Signatures) != 0 {
		t.Errorf("Signatures = %+v, want none", got.Signatures)
	}
	counts := map[error]int{}
	for _, reason := range skippedReasons(t, rep) {
		counts[reason]++
	}
	if counts[ErrMalformedBundle] != MaxReferrers || counts[ErrTooManyReferrers] != 2 {
		t.Errorf("skipped %v, want %d malformed and 2 over the cap", counts, MaxReferrers)
	}
	// Ping and list, then a manifest and a blob for each referrer read, and
	// with none verified the one look at the legacy signature tag.
	if n, want := len(reg.Paths())-before, 3+2*MaxReferrers; n != want {
		t.Errorf("%d registry requests, want %d", n, want)
	}
}

func TestVerifyUnsigned(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	otherRef := reg.PushImage(t, "plugins/fx", nil)
	for name, attach := range map[string]func(ref plugins.ImageRef){
		"no referrers": func(plugins.ImageRef) {},
		"signature over another digest only": func(ref plugins.ImageRef) {
			reg.Attach(t, ref, k.Bundle(t, cosigntest.Statement(t, otherRef.Digest(), plugins.SignPredicateType)), plugins.SignPredicateType)
		},
		"only another predicate type": func(ref plugins.ImageRef) {
			const sbom = "https://spdx.dev/Document"
			reg.Attach(t, ref, k.Bundle(t, cosigntest.Statement(t, ref.Digest(), sbom)), sbom)
		},
	} {
		t.Run(name, func(t *testing.T) {
			// The label is there, but an unsigned image's label is never read.
			ref := reg.PushImage(t, "plugins/"+strings.ReplaceAll(name, " ", "-"), cosigntest.ManifestLabel(t, testManifest))
			attach(ref)
			before := len(reg.Paths())
			got, _ := mustVerify(t, newVerifier(t, k), ref)
			if len(got.Signatures) != 0 || got.Manifest != nil {
				t.Errorf("got %+v, want no signatures and no manifest", got)
			}
			for _, p := range reg.Paths()[before:] {
				if strings.HasSuffix(p, "/manifests/"+ref.Digest()) {
					t.Errorf("read the unsigned image's manifest: %s", p)
				}
			}
		})
	}
}

func TestVerifyNonBundleReferrersIgnored(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	ref := reg.PushImage(t, "plugins/fx", nil)
	// An SBOM attached as its own artifact type, with the layer shape too.
	sbom := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"artifactType":"application/spdx+json",` +
		`"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},` +
		`"layers":[{"mediaType":"application/spdx+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}],` +
		`"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + ref.Digest() + `","size":1}}`
	// The empty config blob must exist before a manifest may refer to it.
	reg.Sign(t, ref, k)
	repo := digestOf(t, ref).Context()
	reg.PutManifest(t, repo, []byte(sbom))

	got, rep := mustVerify(t, newVerifier(t, k), ref)
	if len(got.Signatures) != 1 {
		t.Errorf("Signatures = %+v, want the one keyless signature", got.Signatures)
	}
	if rep.Referrers != 2 || rep.Ignored != 1 || len(rep.Skipped) != 0 {
		t.Errorf("Report = %+v, want 2 referrers, 1 ignored, none skipped", rep)
	}
}

func TestVerifyLabel(t *testing.T) {
	for name, tc := range map[string]struct {
		labels  map[string]string
		want    *plugins.Manifest
		wantErr error
	}{
		"label":         {labels: map[string]string{plugins.ManifestLabel: `{"capabilities":["connector"],"egress":["api.example.com"]}`}, want: &testManifest},
		"no label":      {labels: map[string]string{"org.opencontainers.image.title": "fx"}},
		"not JSON":      {labels: map[string]string{plugins.ManifestLabel: `{"capabilities":`}, wantErr: plugins.ErrInvalidLabel},
		"unknown field": {labels: map[string]string{plugins.ManifestLabel: `{"capabilities":["connector"],"rbac":["*"]}`}, wantErr: plugins.ErrInvalidLabel},
		"invalid value": {labels: map[string]string{plugins.ManifestLabel: `{"capabilities":["root"]}`}, wantErr: plugins.ErrInvalidLabel},
	} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, true)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			ref := reg.PushImage(t, "plugins/fx", tc.labels)
			reg.Sign(t, ref, k)

			got, _, err := newVerifier(t, k).Verify(context.Background(), ref)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, ErrRegistryUnavailable) {
				t.Errorf("an invalid label reads as a registry error: %v", err)
			}
			// The signatures stay, so the operator can tell who signed it.
			if diff := cmp.Diff([]plugins.SignatureIdentity{keylessID()}, got.Signatures); diff != "" {
				t.Errorf("Signatures (-want +got):\n%s", diff)
			}
			if (got.Manifest == nil) != (tc.want == nil) || (got.Manifest != nil && !got.Manifest.Equal(*tc.want)) {
				t.Errorf("Manifest = %+v, want %+v", got.Manifest, tc.want)
			}
		})
	}
}

func TestVerifyIndex(t *testing.T) {
	amd := plugins.Manifest{Capabilities: []plugins.Capability{"connector"}}
	arm := plugins.Manifest{Capabilities: []plugins.Capability{"view"}}
	for name, tc := range map[string]struct {
		platforms map[string]map[string]string
		want      *plugins.Manifest
		wantErr   error
	}{
		"linux/amd64 chosen": {
			platforms: map[string]map[string]string{"linux/amd64": cosigntest.ManifestLabel(t, amd), "linux/arm64": cosigntest.ManifestLabel(t, arm)},
			want:      &amd,
		},
		"the only platform": {
			platforms: map[string]map[string]string{"linux/arm64": cosigntest.ManifestLabel(t, arm)},
			want:      &arm,
		},
		"no amd64 among several": {
			platforms: map[string]map[string]string{"linux/arm64": cosigntest.ManifestLabel(t, arm), "linux/s390x": cosigntest.ManifestLabel(t, arm)},
			wantErr:   ErrNoPlatform,
		},
	} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, true)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			ref := reg.PushIndex(t, "plugins/fx", tc.platforms)
			reg.Sign(t, ref, k)

			got, _, err := newVerifier(t, k).Verify(context.Background(), ref)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(got.Signatures) != 1 {
				t.Errorf("Signatures = %+v, want the index's signature", got.Signatures)
			}
			if (got.Manifest == nil) != (tc.want == nil) || (got.Manifest != nil && !got.Manifest.Equal(*tc.want)) {
				t.Errorf("Manifest = %+v, want %+v", got.Manifest, tc.want)
			}
		})
	}
}

func TestVerifyRegistryUnavailable(t *testing.T) {
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)

	t.Run("closed", func(t *testing.T) {
		reg := cosigntest.NewRegistry(t, true)
		ref := reg.PushImage(t, "plugins/fx", nil)
		reg.Sign(t, ref, k)
		reg.Close()
		checkUnavailable(t, newVerifier(t, k), ref, 0)
	})

	t.Run("forbidden", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"errors":[{"code":"DENIED","message":"no"}]}`, http.StatusForbidden)
		}))
		defer srv.Close()
		ref := mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/plugins/fx@sha256:"+strings.Repeat("ab", 32))
		checkUnavailable(t, newVerifier(t, k), ref, http.StatusForbidden)
	})

	t.Run("bundle blob fails after listing", func(t *testing.T) {
		reg := cosigntest.NewRegistry(t, true)
		ref := reg.PushImage(t, "plugins/fx", nil)
		reg.Sign(t, ref, k)
		// Blobs answer 500; the listing and manifests still work.
		v := newVerifier(t, k, WithTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, "/blobs/") {
				return &http.Response{StatusCode: http.StatusInternalServerError, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
			}
			return http.DefaultTransport.RoundTrip(req)
		})))
		checkUnavailable(t, v, ref, http.StatusInternalServerError)
	})
}

func checkUnavailable(t *testing.T, v *Verifier, ref plugins.ImageRef, status int) {
	t.Helper()
	got, _, err := v.Verify(context.Background(), ref)
	if !errors.Is(err, ErrRegistryUnavailable) {
		t.Fatalf("err = %v, want ErrRegistryUnavailable", err)
	}
	var re *RegistryError
	if !errors.As(err, &re) || re.StatusCode != status {
		t.Errorf("err = %#v, want a *RegistryError with status %d", err, status)
	}
	if len(got.Signatures) != 0 || got.Manifest != nil {
		t.Errorf("got %+v with a registry error", got)
	}
}

func TestVerifyRoundTrips(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, testManifest))
	reg.Sign(t, ref, k)
	v := newVerifier(t, k)

	before := len(reg.Paths())
	mustVerify(t, v, ref)
	got := reg.Paths()[before:]
	// One ping, the referrers list, the bundle's manifest and blob, the
	// image's manifest and config: what the protocol needs for one bundle.
	want := 6
	if len(got) != want {
		t.Errorf("%d registry requests, want %d: %v", len(got), want, got)
	}
}

func TestNewVerifierRefusesBadKey(t *testing.T) {
	if _, err := NewVerifier(WithPublicKeys([]string{"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"})); err == nil {
		t.Error("NewVerifier accepted a malformed public key")
	}
}

func TestVerifyRefusesZeroRef(t *testing.T) {
	v, err := NewVerifier()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(context.Background(), plugins.ImageRef{}); !errors.Is(err, plugins.ErrInvalidImage) {
		t.Errorf("err = %v, want ErrInvalidImage", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func mustRef(t testing.TB, s string) plugins.ImageRef {
	t.Helper()
	ref, err := plugins.ParseImageRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func digestOf(t testing.TB, ref plugins.ImageRef) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func nowPlus5m() time.Time { return time.Now().Add(5 * time.Minute) }

// BenchmarkVerify is one uncached verification of a keyless-signed image
// with its label, against a registry on loopback. It reports the registry
// requests per verification (see TestVerifyRoundTrips); the operator's
// PolicyVerifier caches signed results by digest, so a cached
// verification makes none.
func BenchmarkVerify(b *testing.B) {
	for name, referrersAPI := range map[string]bool{"referrers API": true, "tag fallback": false} {
		b.Run(name, func(b *testing.B) {
			reg := cosigntest.NewRegistry(b, referrersAPI)
			k := cosigntest.NewKeyless(b, testIssuer, testSubject)
			ref := reg.PushImage(b, "plugins/fx", cosigntest.ManifestLabel(b, testManifest))
			reg.Sign(b, ref, k)
			v, err := NewVerifier(WithTrustedMaterial(k.VS), WithSCTRequired(false))
			if err != nil {
				b.Fatal(err)
			}
			before := reg.Requests()
			b.ResetTimer()
			for b.Loop() {
				got, _, err := v.Verify(context.Background(), ref)
				if err != nil || len(got.Signatures) != 1 || got.Manifest == nil {
					b.Fatalf("Verify = %+v, %v", got, err)
				}
			}
			b.ReportMetric(float64(reg.Requests()-before)/float64(b.N), "requests/op")
		})
	}
}
