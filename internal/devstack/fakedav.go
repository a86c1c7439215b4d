package devstack

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/net/webdav"
)

// FakeDAVHost is the name the WebDAV stand-in answers to: a name under
// .test (RFC 2606), which no real server has.
const FakeDAVHost = "dav.openfief.test"

// fakeDAVFolder is the folder of the stand-in the view writes into; it
// exists from the start, as the owner's folder would.
const fakeDAVFolder = "openfief"

// FakeDAV stands in for the owner's own WebDAV server (a Nextcloud folder,
// a NAS) for the webdav-csv view: golang.org/x/net/webdav serving a
// directory of this machine, over HTTPS with a certificate for FakeDAVHost
// from a CA of its own, behind HTTP basic authentication with a user name
// and password it makes up. Like FakeNBP, the egress proxy reaches it on
// loopback in local mode and at a StandIn address of the real node's
// bridge in-cluster; nothing else resolves its name.
type FakeDAV struct {
	srv    *http.Server
	ln     net.Listener
	root   string
	caPEM  []byte
	caFile string
	dir    string
	// Username and Password are the credentials it takes, for the
	// webdav-credentials Secret.
	Username, Password string
	// Requests counts the requests it received, refused ones included.
	Requests atomic.Int64
}

// StartFakeDAV serves root (which it creates, with the view's folder in
// it) on addr (host:port; port 0 picks one; empty means 127.0.0.2:0, a
// loopback address of its own so that port 443 of it maps to this server
// alone) until Close.
func StartFakeDAV(addr, root string) (*FakeDAV, error) {
	if addr == "" {
		addr = "127.0.0.2:0"
	}
	if err := os.MkdirAll(filepath.Join(root, fakeDAVFolder), 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fake-dav-")
	if err != nil {
		return nil, err
	}
	f := &FakeDAV{root: root, dir: dir, Username: "owner"}
	fail := func(err error) (*FakeDAV, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return fail(err)
	}
	f.Password = hex.EncodeToString(secret)
	var cert tls.Certificate
	if f.caPEM, cert, err = standInCert(FakeDAVHost, "openfief WebDAV stand-in CA"); err != nil {
		return fail(err)
	}
	f.caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(f.caFile, f.caPEM, 0o600); err != nil {
		return fail(err)
	}
	if f.ln, err = net.Listen("tcp", addr); err != nil {
		return fail(err)
	}
	dav := &webdav.Handler{FileSystem: webdav.Dir(root), LockSystem: webdav.NewMemLS()}
	f.srv = &http.Server{
		Handler:           f.authenticate(dav),
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = f.srv.ServeTLS(f.ln, "", "") }()
	return f, nil
}

// authenticate passes on only requests with the stand-in's credentials.
func (f *FakeDAV) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Requests.Add(1)
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(f.Username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(f.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="openfief stand-in"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// FolderURL is the folder the view writes into, as webdav-csv's config
// names it.
func (f *FakeDAV) FolderURL() string { return "https://" + FakeDAVHost + "/" + fakeDAVFolder + "/" }

// Files lists the files under the folder, by their paths relative to it
// with slashes, sorted.
func (f *FakeDAV) Files() ([]string, error) {
	base := filepath.Join(f.root, fakeDAVFolder)
	var out []string
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(base, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	slices.Sort(out)
	return out, err
}

// ReadFile reads one file of the folder by the path Files gave.
func (f *FakeDAV) ReadFile(rel string) ([]byte, error) {
	if !filepath.IsLocal(rel) {
		return nil, errors.New("not a path inside the folder")
	}
	return os.ReadFile(filepath.Join(f.root, fakeDAVFolder, filepath.FromSlash(rel)))
}

// Addr is the server's host:port.
func (f *FakeDAV) Addr() string { return f.ln.Addr().String() }

// CAFile is the PEM file of the CA that signed its certificate.
func (f *FakeDAV) CAFile() string { return f.caFile }

// CAPEM is the same CA certificate as PEM bytes, for an image's CA bundle.
func (f *FakeDAV) CAPEM() []byte { return f.caPEM }

// Close stops the server and removes its CA file; the served files stay.
func (f *FakeDAV) Close() {
	_ = f.srv.Close()
	_ = os.RemoveAll(f.dir)
}

// route is how the egress proxy reaches it (standInRoutes).
func (f *FakeDAV) route() standInRoute { return routeOf(FakeDAVHost, f.ln) }

// WriteCredentials writes its user name and password into dir (made 0700)
// as the files username and password (0600), for the owner's
// webdav-credentials Secret: a script reads them from there with
// --from-file, so they never appear in a command line or its output.
func (f *FakeDAV) WriteCredentials(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, v := range map[string]string{"username": f.Username, "password": f.Password} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Dir is the directory of this machine the view's folder is served from.
func (f *FakeDAV) Dir() string { return filepath.Join(f.root, fakeDAVFolder) }
