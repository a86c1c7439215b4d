package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// A vendor's image reaches the node of `openfief dev` through the stack's
// registry: pushed to PushRegistry, named in the Plugin under RegistryHost.
// A plain copy (crane copy, docker push) takes the image but not what is
// attached to its digest, so the signature stays behind and the operator
// refuses the copy as Unsigned. CopyImage copies the image with its
// referrers, the cosign v3 signature bundles and attestations, which keep
// verifying since the digest is unchanged.

// maxCopyResponseBytes caps each response of the source registry (a
// manifest, a layer, a bundle), which is the vendor's and so not trusted.
const maxCopyResponseBytes = 1 << 30

// CopyResult is what CopyImage copied.
type CopyResult struct {
	// Image is the copy's name as a Plugin names it: the stack registry's
	// RegistryHost, the repository given and the source's digest.
	Image plugins.ImageRef
	// Referrers are the digests of the referrers copied with it, and
	// Skipped how many more the source listed than the operator reads
	// (cosign.MaxReferrers), which were not copied.
	Referrers []string
	Skipped   int
}

// CopyImage copies src, pinned by digest, with its referrers (at most
// cosign.MaxReferrers, as many as the operator reads) into the registry
// at push under repo, and returns the copy's name under pull (the same
// address but in the in-cluster mode; see Stack.PushRegistry). The
// source is read with the owner's registry credentials as crane and
// cosign find them, over HTTPS unless it is on loopback; a referrer the
// source lists through the Referrers API or cosign's sha256-<hex> tag
// (a registry without that API) is copied all the same, and the stack's
// registry, which has the API, lists it for the copy. The source may
// redirect a read only over HTTPS to a public address, and no response
// may exceed 1 GiB.
func CopyImage(ctx context.Context, src plugins.ImageRef, push, pull, repo string) (CopyResult, error) {
	srcRef, err := name.NewDigest(src.String(), registryNameOptions(src.Registry())...)
	if err != nil {
		return CopyResult{}, fmt.Errorf("source image: %w", err)
	}
	dstRepo, err := name.NewRepository(push+"/"+repo, registryNameOptions(push)...)
	if err != nil {
		return CopyResult{}, fmt.Errorf("repository %q: %w", repo, err)
	}
	read := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithTransport(&copyTransport{base: remote.DefaultTransport, origin: src.Registry()}),
	}
	write := []remote.Option{remote.WithContext(ctx)}
	if err := copyManifest(srcRef, dstRepo.Digest(src.Digest()), read, write); err != nil {
		return CopyResult{}, fmt.Errorf("copy %s: %w", src, err)
	}
	refs, err := remote.Referrers(srcRef, read...)
	if err != nil {
		return CopyResult{}, fmt.Errorf("list the referrers of %s: %w", src, err)
	}
	idx, err := refs.IndexManifest()
	if err != nil {
		return CopyResult{}, fmt.Errorf("the referrers of %s: %w", src, err)
	}
	var res CopyResult
	for i, d := range idx.Manifests {
		if i == cosign.MaxReferrers {
			res.Skipped = len(idx.Manifests) - i
			break
		}
		from := srcRef.Context().Digest(d.Digest.String())
		if err := copyManifest(from, dstRepo.Digest(d.Digest.String()), read, write); err != nil {
			return CopyResult{}, fmt.Errorf("copy the referrer %s of %s: %w", d.Digest, src, err)
		}
		res.Referrers = append(res.Referrers, d.Digest.String())
	}
	if res.Image, err = plugins.ParseImageRef(pull + "/" + repo + "@" + src.Digest()); err != nil {
		return CopyResult{}, err
	}
	return res, nil
}

// CopyImage copies src with its referrers into the stack's registry under
// repo (the package's CopyImage, from PushRegistry to RegistryHost).
func (s *Stack) CopyImage(ctx context.Context, src plugins.ImageRef, repo string) (CopyResult, error) {
	return CopyImage(ctx, src, s.PushRegistry(), s.RegistryHost, repo)
}

// copyManifest copies the image or index from names to to, by digest,
// byte for byte (go-containerregistry writes the manifest it read).
func copyManifest(from, to name.Digest, read, write []remote.Option) error {
	desc, err := remote.Get(from, read...)
	if err != nil {
		return err
	}
	if desc.Digest.String() != from.DigestStr() {
		return fmt.Errorf("the registry answered %s with a manifest of digest %s", from.DigestStr(), desc.Digest)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return err
		}
		return remote.WriteIndex(to, idx, write...)
	}
	img, err := desc.Image()
	if err != nil {
		return err
	}
	return remote.Write(to, img, write...)
}

// registryNameOptions allows plain HTTP for a loopback registry only, as
// the CLI and the operator read one.
func registryNameOptions(registry string) []name.Option {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	if a, err := netip.ParseAddr(host); (err == nil && a.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return []name.Option{name.Insecure}
	}
	return nil
}

// copyTransport caps each response body of the source registry and lets
// it redirect a read only over HTTPS to a host that is not written as a
// loopback, private or link-local address (a registry may hand its blobs
// to a CDN; it may not send this machine to its own services). A loopback
// source may redirect within loopback.
type copyTransport struct {
	base   http.RoundTripper
	origin string
}

func (t *copyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Response != nil && len(registryNameOptions(t.origin)) == 0 {
		if req.URL.Scheme != "https" {
			return nil, fmt.Errorf("refusing the redirect from %s to plain %s", t.origin, req.URL.Scheme)
		}
		host := strings.ToLower(req.URL.Hostname())
		a, err := netip.ParseAddr(host)
		if host == "localhost" || strings.HasSuffix(host, ".localhost") || (err == nil && !a.IsGlobalUnicast()) || (err == nil && a.IsPrivate()) {
			return nil, fmt.Errorf("refusing the redirect from %s to %s, which is not a public address", t.origin, host)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxCopyResponseBytes}
	return resp, nil
}

// errTooBig is a source response longer than maxCopyResponseBytes.
var errTooBig = errors.New("the source registry's response is longer than 1 GiB")

// cappedBody fails a read past its limit.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errTooBig
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
