// Package cosigntest is a test kit for image signatures: an in-process OCI
// registry, images that carry a manifest label, built without Docker, and
// signers that attach Sigstore bundles to an image digest the way cosign v3
// does: keyless through sigstore-go's virtual Sigstore, and with a key. The
// cosign package's tests use it, and the operator, CLI and end-to-end tests
// can reuse it (D-17, D-42).
package cosigntest

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Registry is an in-process OCI registry (go-containerregistry's
// pkg/registry) on a loopback httptest server. It counts the requests it
// serves.
type Registry struct {
	// Host is host:port, the registry part of image references.
	Host     string
	server   *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	paths    []string
	gate     func(http.ResponseWriter, *http.Request) bool
}

// NewRegistry starts a registry that is closed when t ends. With referrers
// false it lacks the OCI Referrers API, so clients must use the
// sha256-<hex> tag schema.
func NewRegistry(t testing.TB, referrers bool) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.WithReferrersSupport(referrers), registry.Logger(discardLogger()))
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		r.mu.Lock()
		r.paths = append(r.paths, req.Method+" "+req.URL.Path)
		gate := r.gate
		r.mu.Unlock()
		if gate != nil && gate(w, req) {
			return
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.server.Close)
	r.Host = strings.TrimPrefix(r.server.URL, "http://")
	return r
}

// Gate makes gate see every later request first: when it returns true it
// has answered the request and the registry does not serve it, such as a
// private registry's 401 to a request without the right credentials. Set it
// after pushing.
func (r *Registry) Gate(gate func(w http.ResponseWriter, req *http.Request) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate = gate
}

// URL is the registry's base URL, http://host:port.
func (r *Registry) URL() string { return r.server.URL }

// Close stops the registry; later requests fail to connect.
func (r *Registry) Close() { r.server.Close() }

// Requests is how many HTTP requests the registry has served.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// Paths lists the requests served so far as "METHOD /path", in order.
func (r *Registry) Paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.paths)
}

// Ref returns repo@digest in this registry as an ImageRef.
func (r *Registry) Ref(t testing.TB, repo string, digest v1.Hash) plugins.ImageRef {
	t.Helper()
	ref, err := plugins.ParseImageRef(r.Host + "/" + repo + "@" + digest.String())
	if err != nil {
		t.Fatalf("image reference: %v", err)
	}
	return ref
}

// PushImage pushes a random single-layer image whose config carries labels
// and returns its reference by digest.
func (r *Registry) PushImage(t testing.TB, repo string, labels map[string]string) plugins.ImageRef {
	t.Helper()
	return r.Push(t, repo, Image(t, labels))
}

// Push pushes img to repo and returns its reference by digest.
func (r *Registry) Push(t testing.TB, repo string, img v1.Image) plugins.ImageRef {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := r.Ref(t, repo, d)
	if err := remote.Write(digestRef(t, ref), img); err != nil {
		t.Fatalf("push image: %v", err)
	}
	return ref
}

// PushIndex pushes an image index holding one random image per platform
// ("linux/amd64", "linux/arm64", ...), each with its own labels, plus a
// buildx-style attestation manifest (platform unknown/unknown), and returns
// the index's reference by digest.
func (r *Registry) PushIndex(t testing.TB, repo string, labelsByPlatform map[string]map[string]string) plugins.ImageRef {
	t.Helper()
	var adds []mutate.IndexAddendum
	for platform, labels := range labelsByPlatform {
		os, arch, _ := strings.Cut(platform, "/")
		adds = append(adds, mutate.IndexAddendum{
			Add:        Image(t, labels),
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os, Architecture: arch}},
		})
	}
	adds = append(adds, mutate.IndexAddendum{
		Add: Image(t, nil),
		Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest"},
		},
	})
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := r.Ref(t, repo, d)
	if err := remote.WriteIndex(digestRef(t, ref), idx); err != nil {
		t.Fatalf("push index: %v", err)
	}
	return ref
}

// Image builds a random single-layer OCI image whose config carries labels.
func Image(t testing.TB, labels map[string]string) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// ManifestLabel encodes m as the io.openfief.plugin.manifest label value.
func ManifestLabel(t testing.TB, m plugins.Manifest) map[string]string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{plugins.ManifestLabel: string(b)}
}

func digestRef(t testing.TB, ref plugins.ImageRef) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// ConfigDigest returns the digest of the config blob (where the labels are)
// of ref's image, read from the registry.
func (r *Registry) ConfigDigest(t testing.TB, ref plugins.ImageRef) string {
	t.Helper()
	img, err := remote.Image(digestRef(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Config.Digest.String()
}
