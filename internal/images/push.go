package images

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Repository is where an image goes under a registry prefix such as
// ghcr.io/arkadiuss or localhost:5000: <prefix>/openfief/<name>, the names
// deploy/ and the docs use.
func Repository(prefix, image string) string {
	return strings.TrimSuffix(prefix, "/") + "/openfief/" + image
}

// PushOptions configures Push and PushIndex.
type PushOptions struct {
	// Insecure reads and writes the registry over plain HTTP; loopback
	// registries always are.
	Insecure bool
	// Tag also tags each index; empty pushes by digest only.
	Tag string
	// Progress receives a line per pushed index; nil discards them.
	Progress io.Writer
}

// Pushed is an index in a registry.
type Pushed struct {
	// Name is the image's name (Spec.Name).
	Name string `json:"name"`
	// Ref is repository@sha256:<hex>.
	Ref string `json:"ref"`
}

// Push sends every index of res, with its images, to Repository(prefix,
// name), authenticating as the Docker config's credentials say.
func Push(ctx context.Context, res *Result, prefix string, opts PushOptions) ([]Pushed, error) {
	var out []Pushed
	for _, b := range res.Images {
		ref, err := PushIndex(ctx, Repository(prefix, b.Spec.Name), b.Index, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, Pushed{Name: b.Spec.Name, Ref: ref.String()})
	}
	return out, nil
}

// PushIndex sends idx and its images to repo and returns its reference by
// digest.
func PushIndex(ctx context.Context, repo string, idx v1.ImageIndex, opts PushOptions) (plugins.ImageRef, error) {
	d, err := idx.Digest()
	if err != nil {
		return plugins.ImageRef{}, err
	}
	var nopts []name.Option
	if opts.Insecure || isLoopback(repo) {
		nopts = append(nopts, name.Insecure)
	}
	var target name.Reference
	if opts.Tag != "" {
		target, err = name.NewTag(repo+":"+opts.Tag, nopts...)
	} else {
		target, err = name.NewDigest(repo+"@"+d.String(), nopts...)
	}
	if err != nil {
		return plugins.ImageRef{}, err
	}
	if err := remote.WriteIndex(target, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return plugins.ImageRef{}, fmt.Errorf("push %s: %w", target, err)
	}
	ref, err := plugins.ParseImageRef(repo + "@" + d.String())
	if err != nil {
		return plugins.ImageRef{}, err
	}
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "pushed %s\n", ref)
	}
	return ref, nil
}

// isLoopback reports whether a repository's registry is on this machine.
func isLoopback(repo string) bool {
	host, _, _ := strings.Cut(repo, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pushFile sits in a build's directory and lists where it was pushed.
const pushFile = "push.json"

// PushRecord is push.json: the registry prefix and the pushed indexes.
type PushRecord struct {
	Prefix string   `json:"prefix"`
	Images []Pushed `json:"images"`
}

// WritePushRecord stores where the build in dir was pushed.
func WritePushRecord(dir string, r PushRecord) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, pushFile), append(raw, '\n'), 0o644)
}

// ReadPushRecord reads where the build in dir was pushed.
func ReadPushRecord(dir string) (PushRecord, error) {
	var r PushRecord
	raw, err := os.ReadFile(filepath.Join(dir, pushFile))
	if os.IsNotExist(err) {
		return r, fmt.Errorf("the build in %s was not pushed: run make images REGISTRY=<host[:port][/path]>", dir)
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(dir, pushFile), err)
	}
	return r, nil
}

// Ref returns the pushed reference of the named image.
func (r PushRecord) Ref(image string) (plugins.ImageRef, error) {
	for _, p := range r.Images {
		if p.Name == image {
			return plugins.ParseImageRef(p.Ref)
		}
	}
	return plugins.ImageRef{}, fmt.Errorf("push record has no image %s", image)
}
