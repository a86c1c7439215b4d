package cosign

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerifyLegacySignature: a signature in cosign's legacy format (the
// sha256-<hex>.sig tag) is not a signature the verifier counts, with or
// without the Referrers API, but it is reported; an unsigned image without
// one reports none, and a signed image is not looked at for one.
func TestVerifyLegacySignature(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		t.Run(map[bool]string{true: "referrers API", false: "tag fallback"}[referrers], func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, referrers)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			v := newVerifier(t, k)

			legacy := reg.PushImage(t, "plugins/legacy", cosigntest.ManifestLabel(t, testManifest))
			reg.SignLegacy(t, legacy)
			before := len(reg.Paths())
			got, rep := mustVerify(t, v, legacy)
			if len(got.Signatures) != 0 || got.Manifest != nil {
				t.Errorf("legacy-signed image: got %+v, want no signatures and no manifest", got)
			}
			if !rep.LegacySignature {
				t.Errorf("legacy-signed image: Report = %+v, want LegacySignature", rep)
			}
			for _, p := range reg.Paths()[before:] {
				if strings.HasSuffix(p, "/manifests/"+legacy.Digest()) {
					t.Errorf("read the unsigned image's manifest: %s", p)
				}
			}

			unsigned := reg.PushImage(t, "plugins/unsigned", nil)
			if _, rep := mustVerify(t, v, unsigned); rep.LegacySignature {
				t.Errorf("unsigned image: Report = %+v, want no LegacySignature", rep)
			}

			signed := reg.PushImage(t, "plugins/signed", cosigntest.ManifestLabel(t, testManifest))
			reg.Sign(t, signed, k)
			before = len(reg.Paths())
			if got, _ := mustVerify(t, v, signed); len(got.Signatures) != 1 {
				t.Errorf("signed image: Signatures = %+v", got.Signatures)
			}
			for _, p := range reg.Paths()[before:] {
				if strings.HasSuffix(p, ".sig") {
					t.Errorf("looked for a legacy signature of a signed image: %s", p)
				}
			}
		})
	}
}

// TestVerifyLegacySignatureReferrer: cosign's experimental OCI 1.1 mode
// attaches a legacy signature as a referrer of its own artifact type (in
// artifactType and the config's media type); it is reported as found.
func TestVerifyLegacySignatureReferrer(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	ref := reg.PushImage(t, "plugins/fx", nil)
	img := cosigntest.LegacySignatureImage(t, ref)
	// Push its blobs by pushing it, then its manifest again as a referrer.
	repo := digestOf(t, ref).Context()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg.Push(t, "plugins/fx", img)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	// cosign names the artifact type in the config's media type too, which
	// is what this registry reports as a referrer's artifactType.
	m.Config.MediaType = cosigntest.LegacySignatureArtifactType
	raw, err := json.Marshal(struct {
		SchemaVersion int64  `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		ArtifactType  string `json:"artifactType"`
		Config        any    `json:"config"`
		Layers        any    `json:"layers"`
		Subject       any    `json:"subject"`
	}{2, string(m.MediaType), cosigntest.LegacySignatureArtifactType, m.Config, m.Layers,
		map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ref.Digest(), "size": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.PutManifest(t, repo, raw); got == h {
		t.Fatal("the referrer manifest is the plain image's")
	}

	got, rep := mustVerify(t, newVerifier(t, k), ref)
	if len(got.Signatures) != 0 || !rep.LegacySignature || rep.Referrers != 1 || rep.Ignored != 1 {
		t.Errorf("got %+v, Report %+v: want no signatures, one ignored referrer and LegacySignature", got, rep)
	}
}

// TestLegacySignatureReadFailsClosed: when the read of the sha256-<hex>.sig
// tag fails or redirects, the verdict is what it is without it (unsigned, no
// error) and no hint is given; a redirect is not followed.
func TestLegacySignatureReadFailsClosed(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		http.NotFound(w, nil)
	}))
	defer other.Close()
	for name, answer := range map[string]func(w http.ResponseWriter, req *http.Request){
		"server error": func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
		"unauthorized": func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusUnauthorized) },
		"redirect": func(w http.ResponseWriter, req *http.Request) {
			http.Redirect(w, req, other.URL+req.URL.Path, http.StatusTemporaryRedirect)
		},
		"over the cap": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			_, _ = w.Write([]byte(`{"schemaVersion":2,"layers":[{"mediaType":"` + cosigntest.SimpleSigningMediaType + `"}],"x":"`))
			_, _ = w.Write([]byte(strings.Repeat("a", MaxResponseBytes)))
			_, _ = w.Write([]byte(`"}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, true)
			k := cosigntest.NewKeyless(t, testIssuer, testSubject)
			ref := reg.PushImage(t, "plugins/fx", nil)
			reg.SignLegacy(t, ref)
			reg.Gate(func(w http.ResponseWriter, req *http.Request) bool {
				if strings.HasSuffix(req.URL.Path, ".sig") {
					answer(w, req)
					return true
				}
				return false
			})
			got, rep := mustVerify(t, newVerifier(t, k), ref)
			if len(got.Signatures) != 0 || rep.LegacySignature {
				t.Errorf("got %+v, Report %+v: want unsigned without a legacy signature", got, rep)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("followed the redirect: %d requests elsewhere", n)
			}
		})
	}
}

func TestIsLegacySignatureManifest(t *testing.T) {
	ref := mustRef(t, "registry.example/plugins/fx@sha256:"+strings.Repeat("5e", 32))
	img := cosigntest.LegacySignatureImage(t, ref)
	legacyRaw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		raw  string
		want bool
	}{
		"cosign's legacy signature": {string(legacyRaw), true},
		"docker media type":         {`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","layers":[{"mediaType":"` + cosigntest.SimpleSigningMediaType + `"}]}`, true},
		"no media type":             {`{"schemaVersion":2,"layers":[{"mediaType":"` + cosigntest.SimpleSigningMediaType + `"}]}`, true},
		"a bundle referrer":         {`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}]}`, false},
		"an image index":            {`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","layers":[{"mediaType":"` + cosigntest.SimpleSigningMediaType + `"}]}`, false},
		"no layers":                 {`{"schemaVersion":2}`, false},
		"not json":                  {`sig`, false},
		"empty":                     {``, false},
	} {
		if got := isLegacySignatureManifest([]byte(tc.raw)); got != tc.want {
			t.Errorf("%s: isLegacySignatureManifest = %v, want %v", name, got, tc.want)
		}
	}
}

// FuzzIsLegacySignatureManifest: the legacy-signature recogniser reads
// whatever a registry sent under a tag. It must never panic, and it must
// not say yes to anything without a simple-signing layer.
func FuzzIsLegacySignatureManifest(f *testing.F) {
	ref := mustRef(f, "registry.example/plugins/fx@sha256:"+strings.Repeat("5e", 32))
	legacyRaw, err := cosigntest.LegacySignatureImage(f, ref).RawManifest()
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{string(legacyRaw), `{"schemaVersion":2}`, `{"layers":[{"mediaType":1}]}`, `[]`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if isLegacySignatureManifest(raw) && !strings.Contains(string(raw), "simplesigning") && !strings.Contains(string(raw), `\u`) {
			t.Errorf("recognised %q without a simple-signing layer", raw)
		}
	})
}
