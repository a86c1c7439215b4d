package images

import (
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ToolImage packs binary, a program built from a pinned third-party module
// rather than from this tree (CoreDNS, the local real node's cluster DNS),
// into an image of the same shape and reproducibility as the platform's
// own, for this machine's linux platform: the users layer, the binary at
// /<name>, its entrypoint, user 65532:65532, every time epoch. source names
// what it was built from (a module path and version); the image records it
// in its history and as its org.opencontainers.image.source annotation.
func ToolImage(name, source string, binary []byte, epoch time.Time) (v1.Image, error) {
	b, err := newBase(epoch)
	if err != nil {
		return nil, err
	}
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	s := Spec{Name: name, Package: source}
	annotations := map[string]string{
		AnnotationCreated: epoch.UTC().Format(time.RFC3339),
		AnnotationSource:  source,
		AnnotationTitle:   name,
	}
	return newImage(p, s, b, binary, epoch, nil, annotations)
}
