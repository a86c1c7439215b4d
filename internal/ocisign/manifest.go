package ocisign

import (
	"bytes"
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// remoteLayer is what remote.WriteLayer uploads.
type remoteLayer = v1.Layer

// describeLayer is a layer's OCI descriptor as a JSON object.
func describeLayer(l v1.Layer, extra map[string]any) (map[string]any, error) {
	d, err := l.Digest()
	if err != nil {
		return nil, err
	}
	size, err := l.Size()
	if err != nil {
		return nil, err
	}
	mt, err := l.MediaType()
	if err != nil {
		return nil, err
	}
	out := map[string]any{"mediaType": string(mt), "digest": d.String(), "size": size}
	for k, v := range extra {
		out[k] = v
	}
	return out, nil
}

// PutManifest stores a raw OCI image manifest in repo by its digest and
// returns the digest.
func PutManifest(ctx context.Context, repo name.Repository, raw []byte) (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(repo.Digest(h.String()), rawManifest{raw: raw}, remoteOptions(ctx)...); err != nil {
		return v1.Hash{}, fmt.Errorf("put manifest: %w", err)
	}
	return h, nil
}

type rawManifest struct{ raw []byte }

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
