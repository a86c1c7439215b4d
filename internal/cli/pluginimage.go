package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// fetchPluginImage reads ref's image for this machine's platform (linux and
// its architecture; from an index, that entry) with the owner's registry
// credentials, over plain HTTP only for loopback and insecure registries.
// A redirect to plain HTTP is refused. Layers are read lazily by whoever
// unpacks them, which bounds them.
func fetchPluginImage(ctx context.Context, ref plugins.ImageRef, kc authn.Keychain, insecure []string) (v1.Image, error) {
	var nameOpts []name.Option
	if slices.Contains(insecure, ref.Registry()) || loopbackRegistry(ref.Registry()) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	d, err := name.NewDigest(ref.String(), nameOpts...)
	if err != nil {
		return nil, exitf(ExitInvalidImage, "IMAGE: %w", err)
	}
	base := remote.DefaultTransport.(*http.Transport).Clone()
	desc, err := remote.Get(d, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc),
		remote.WithTransport(noPlainRedirect{base}), remote.WithUserAgent("openfief-plugin-test"))
	if err != nil {
		return nil, registryError(d.String(), err)
	}
	want := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	switch {
	case desc.MediaType.IsImage():
		img, err := desc.Image()
		if err != nil {
			return nil, registryError(d.String(), err)
		}
		return img, nil
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, registryError(d.String(), err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, registryError(d.String(), err)
		}
		for _, m := range im.Manifests {
			if m.MediaType.IsImage() && m.Platform != nil && m.Platform.OS == want.OS && m.Platform.Architecture == want.Architecture {
				img, err := idx.Image(m.Digest)
				if err != nil {
					return nil, registryError(d.String(), err)
				}
				return img, nil
			}
		}
		return nil, exitf(ExitInvalidImage, "IMAGE %s: the index has no image for %s/%s", display.Text(d.String()), want.OS, want.Architecture)
	default:
		return nil, exitf(ExitInvalidImage, "IMAGE %s: a %s, not an image", display.Text(d.String()), display.Text(string(desc.MediaType)))
	}
}

// registryError maps a registry read's failure to its exit code: 401 and
// 403 are ExitRegistryUnauthorized, a missing manifest ExitInvalidImage,
// anything else ExitRegistryUnavailable.
func registryError(what string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return exitf(ExitRegistryUnauthorized, "read %s: %s", display.Text(what), display.Message(err.Error()))
		case http.StatusNotFound:
			return exitf(ExitInvalidImage, "read %s: %s", display.Text(what), display.Message(err.Error()))
		}
	}
	return exitf(ExitRegistryUnavailable, "read %s: %s", display.Text(what), display.Message(err.Error()))
}

// loopbackRegistry reports whether host[:port] is on loopback.
func loopbackRegistry(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return host == "localhost" || net.ParseIP(host).IsLoopback()
}

// noPlainRedirect refuses a redirect from HTTPS to plain HTTP.
type noPlainRedirect struct{ base http.RoundTripper }

func (t noPlainRedirect) RoundTrip(req *http.Request) (*http.Response, error) {
	if prev := req.Response; prev != nil && prev.Request != nil && prev.Request.URL.Scheme == "https" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("refusing the redirect from %s to plain %s", prev.Request.URL.Host, req.URL.Scheme)
	}
	return t.base.RoundTrip(req)
}
