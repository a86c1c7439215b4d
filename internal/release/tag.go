package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/mod/semver"

	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// maxImagesFile bounds the images.json read back by TagImages.
const maxImagesFile = 1 << 20

// TagImages tags every image the release in dir lists in its ImagesFile
// with version, the release's version: the last step of the release
// workflow, once the release is published, so that no image carries a
// version tag for a release that was never published (Options.Untagged
// pushes them by digest only). A tag already naming the same digest is left
// as it is; one naming another digest is an error, never moved. It returns
// the references it tagged.
func TagImages(ctx context.Context, dir, version string, insecure bool, progress io.Writer) ([]string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if !semver.IsValid(version) || semver.Build(version) != "" || semver.Canonical(version) != version {
		return nil, fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH, optionally with a pre-release", version)
	}
	raw, err := boundedfile.Read(filepath.Join(dir, ImagesFile), maxImagesFile)
	if err != nil {
		return nil, err
	}
	refs, err := ParseImagesFile(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ImagesFile), err)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	var tagged []string
	for _, ref := range refs {
		d, err := name.NewDigest(ref.String(), opts...)
		if err != nil {
			return tagged, fmt.Errorf("%s: %w", ref, err)
		}
		tag := d.Context().Tag(version)
		if cur, err := remote.Head(tag, ropts...); err == nil {
			if cur.Digest.String() != ref.Digest() {
				return tagged, fmt.Errorf("%s already names %s, not %s: refusing to move a version tag", tag, cur.Digest, ref.Digest())
			}
			fmt.Fprintf(progress, "%s already names %s\n", tag, ref.Digest())
			tagged = append(tagged, tag.String())
			continue
		} else if !isNotFound(err) {
			return tagged, fmt.Errorf("read %s: %w", tag, err)
		}
		desc, err := remote.Get(d, ropts...)
		if err != nil {
			return tagged, fmt.Errorf("read %s: %w", ref, err)
		}
		if err := remote.Tag(tag, desc, ropts...); err != nil {
			return tagged, fmt.Errorf("tag %s: %w", tag, err)
		}
		fmt.Fprintf(progress, "tagged %s as %s\n", ref, tag)
		tagged = append(tagged, tag.String())
	}
	return tagged, nil
}

// ParseImagesFile reads a release's ImagesFile: an object whose one field,
// images, lists every image by name with its reference by digest. Unknown
// fields, a name given twice and a reference not by digest are refused.
func ParseImagesFile(raw []byte) ([]plugins.ImageRef, error) {
	if len(raw) > maxImagesFile {
		return nil, fmt.Errorf("longer than %d bytes", maxImagesFile)
	}
	var f struct {
		Images []imageEntry `json:"images"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not an images file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not an images file: data after the object")
	}
	if len(f.Images) == 0 {
		return nil, errors.New("images: lists no image")
	}
	seen := map[string]bool{}
	refs := make([]plugins.ImageRef, 0, len(f.Images))
	for i, e := range f.Images {
		if !imageName.MatchString(e.Name) || seen[e.Name] {
			return nil, fmt.Errorf("images[%d].name %.100q: not lower-case letters, digits and dashes, or given twice", i, e.Name)
		}
		seen[e.Name] = true
		ref, err := plugins.ParseImageRef(e.Ref)
		if err != nil {
			return nil, fmt.Errorf("images[%d].ref: %w", i, err)
		}
		if !strings.HasSuffix(ref.Name(), "/openfief/"+e.Name) {
			return nil, fmt.Errorf("images[%d].ref %.200q: not in a repository .../openfief/%.100s", i, e.Ref, e.Name)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// imageName is the form of an image's name in a release.
var imageName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// isNotFound reports whether err is a registry's 404 for a manifest.
func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == 404
}
