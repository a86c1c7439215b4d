package webdavcsv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// View is the webdav-csv adapter: a ViewService handler that keeps the
// pages the core exports as monthly CSV files in a WebDAV folder. Build it
// with New.
type View struct {
	cfg          Config
	folder       *url.URL
	client       *http.Client
	credsDir     string
	maxFileBytes int

	// mu runs one Export at a time: a page the core sends again while the
	// first call still writes waits for it, and then finds its rows.
	mu sync.Mutex
}

var _ viewv1connect.ViewServiceHandler = (*View)(nil)

// Option configures a View.
type Option func(*View)

// WithHTTPClient sets the client the WebDAV server is reached with. The
// plugin's main passes the SDK's egress client (D-63); the view copies it
// and refuses redirects on the copy. Without it every Export that has
// something to write fails.
func WithHTTPClient(c *http.Client) Option { return func(v *View) { v.client = c } }

// WithCredentialsDir sets the directory holding the username and password
// files; DefaultCredentialsDir, the manifest's mount path, by default.
func WithCredentialsDir(dir string) Option { return func(v *View) { v.credsDir = dir } }

// New returns the view for cfg, refusing a config that breaks its rules
// (Config.Validate).
func New(cfg Config, opts ...Option) (*View, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	folder, err := ParseFolderURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("config: url: %w", err)
	}
	v := &View{cfg: cfg, folder: folder, credsDir: DefaultCredentialsDir, maxFileBytes: MaxFileBytes}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// Export keeps one page: it turns every entry into rows (a page with an
// entry it cannot write is refused whole, before anything is written),
// groups them by file, and for each file, in path order, reads it, adds
// the rows whose sequence it does not hold yet and writes it back. It
// answers OK only once every file is written; the core then moves the
// view's place past the page (OF-35). A page sent again finds its rows and
// writes nothing.
func (v *View) Export(ctx context.Context, req *connect.Request[viewv1.ExportRequest]) (*connect.Response[viewv1.ExportResponse], error) {
	files := map[string][]record{}
	kinds := map[string]Kind{}
	for _, e := range req.Msg.GetEntries() {
		r, err := recordOf(e)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		if !v.cfg.writes(r.kind) {
			continue
		}
		p := path(r.kind, r.month)
		files[p] = append(files[p], r)
		kinds[p] = r.kind
	}
	if len(files) == 0 {
		return connect.NewResponse(&viewv1.ExportResponse{}), nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.client == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no HTTP client configured"))
	}
	user, pass, err := v.credentials()
	if err != nil {
		return nil, err
	}
	dav := newDAVClient(v.client, v.folder, user, pass)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := v.writeFile(ctx, dav, kinds[p], p, files[p]); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&viewv1.ExportResponse{}), nil
}

// writeFile adds recs to the file at rel. When another writer changed the
// file between the read and the write (412), it reads it again once; a
// second change is CodeUnavailable and the core sends the page again later.
// A new file whose year folder (or the configured folder itself) is missing
// gets them with MKCOL.
func (v *View) writeFile(ctx context.Context, dav *davClient, k Kind, rel string, recs []record) error {
	for range 2 {
		f, err := dav.get(ctx, rel, v.maxFileBytes)
		if err != nil {
			return err
		}
		body, added, err := appendRecords(k, f.body, recs, v.maxFileBytes)
		switch {
		case errors.Is(err, errForeign):
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
				"%s: %w; it is left as it is (move it away, or point url at another folder)", dav.fileURL(rel), err))
		case err != nil:
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s: %w", dav.fileURL(rel), err))
		case added == 0:
			return nil
		}
		err = dav.put(ctx, rel, body, f)
		if errors.Is(err, errNoParent) && !f.exists {
			if err = v.makeFolders(ctx, dav, rel); err == nil {
				err = dav.put(ctx, rel, body, f)
			}
		}
		if !errors.Is(err, errChanged) {
			return err
		}
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf(
		"%s: %w twice while this view wrote it; the core sends the page again later", dav.fileURL(rel), errChanged))
}

// makeFolders creates the year folder of rel and, when that fails for want
// of a parent, the configured folder first. Nothing above the configured
// folder is ever created.
func (v *View) makeFolders(ctx context.Context, dav *davClient, rel string) error {
	year, _, _ := strings.Cut(rel, "/")
	err := dav.mkcol(ctx, year+"/")
	if !errors.Is(err, errNoParent) {
		return err
	}
	if err := dav.mkcol(ctx, ""); err != nil {
		if errors.Is(err, errNoParent) {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
				"the parent of the folder %s does not exist: create it, or correct url", v.folder))
		}
		return err
	}
	return dav.mkcol(ctx, year+"/")
}

// credentials reads the username and password from the Secret's files,
// afresh on every call (a rotated Secret applies at once), through an
// os.Root of their directory. Errors name the files, never their content.
func (v *View) credentials() (user, pass string, err error) {
	read := func(name string) (string, error) {
		tf, err := openfief.NewTokenFile(filepath.Join(v.credsDir, name))
		if err != nil {
			return "", err
		}
		return tf.Read()
	}
	if user, err = read("username"); err != nil {
		return "", "", connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("read the WebDAV username from the webdav-credentials Secret: %w", err))
	}
	if strings.ContainsRune(user, ':') {
		return "", "", connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
			"the WebDAV username in %s holds ':', which Basic authentication cannot carry", filepath.Join(v.credsDir, "username")))
	}
	if pass, err = read("password"); err != nil {
		return "", "", connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("read the WebDAV password from the webdav-credentials Secret: %w", err))
	}
	return user, pass, nil
}
