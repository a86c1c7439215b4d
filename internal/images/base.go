package images

import (
	"bytes"
	"encoding/pem"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The non-root user every image runs as: numeric, so the kubelet can tell
// it is not root (runAsNonRoot), and the same as distroless's nonroot.
const (
	UID  = 65532
	User = "65532:65532"
)

// The base files. Home is /nonexistent: the images hold no home directory,
// and the root file system is read-only where they run.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// CABundlePath is where Go (and OpenSSL) look for the system's roots first.
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// usersLayer holds /etc/passwd and /etc/group.
func usersLayer(mtime time.Time) (v1.Layer, error) {
	return newLayer([]entry{
		dir("etc/"),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
	}, mtime)
}

// caLayer holds CABundlePath.
func caLayer(mtime time.Time) (v1.Layer, error) {
	return newLayer([]entry{
		dir("etc/"),
		dir("etc/ssl/"),
		dir("etc/ssl/certs/"),
		file(CABundlePath[1:], 0o644, CABundle()),
	}, mtime)
}

// CABundle is the PEM bundle of the roots in
// golang.org/x/crypto/x509roots/fallback (Mozilla's NSS trust store), in the
// module's order. Roots that carry a constraint a PEM file cannot express
// (a distrust-after date) are left out: a bundle may only trust less than
// NSS, never more. The version pinned in go.mod decides the content, so the
// bundle is the same on every machine.
func CABundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}
