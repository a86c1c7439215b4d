package webdavcsv

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/display"
)

// userAgent is sent with every request.
const userAgent = "openfief-webdav-csv/1"

// maxAnswerBytes bounds what the view reads of an answer it does not use
// (an error page, a PUT's or MKCOL's body) before it closes it.
const maxAnswerBytes = 64 << 10

// strongETag is an entity tag If-Match can compare: quoted, strong (no W/
// prefix), of the characters RFC 9110 allows, and short.
var strongETag = regexp.MustCompile(`^"[\x21\x23-\x7e]{0,256}"$`)

// Sentinels of a PUT the caller acts on.
var (
	// errChanged: the file changed since it was read (HTTP 412).
	errChanged = errors.New("the file changed since it was read")
	// errNoParent: the file's collection does not exist (HTTP 409).
	errNoParent = errors.New("the file's folder does not exist")
)

// davClient speaks the few WebDAV requests the view needs to one folder,
// with Basic authentication. It never follows a redirect, bounds every body
// it reads, and no error it returns holds the password.
type davClient struct {
	http   *http.Client
	folder *url.URL
	auth   string
	// secrets are scrubbed from every message that quotes something the
	// HTTP stack wrote.
	secrets []string
}

// newDAVClient returns a client of folder through base, which it copies to
// refuse redirects.
func newDAVClient(base *http.Client, folder *url.URL, username, password string) *davClient {
	c := *base
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	auth := base64.StdEncoding.EncodeToString([]byte(username + ":" + password))
	return &davClient{http: &c, folder: folder, auth: "Basic " + auth, secrets: []string{password, auth}}
}

// fileURL is the URL of rel (a path relative to the folder, made only of
// characters that need no escaping).
func (c *davClient) fileURL(rel string) *url.URL {
	u := *c.folder
	u.Path += rel
	if u.RawPath != "" {
		u.RawPath += rel
	}
	return &u
}

// remoteFile is a file as the view read it.
type remoteFile struct {
	body   []byte
	exists bool
	// etag is the file's strong entity tag, or empty when the server gave
	// none the view can send back in If-Match.
	etag string
}

// get reads rel: 404 is a file that does not exist yet; a body larger than
// limit is refused unread.
func (c *davClient) get(ctx context.Context, rel string, limit int) (remoteFile, error) {
	u := c.fileURL(rel)
	resp, err := c.send(ctx, http.MethodGet, u, nil, nil)
	if err != nil {
		return remoteFile{}, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		drain(resp.Body)
		return remoteFile{}, nil
	case resp.StatusCode != http.StatusOK:
		drain(resp.Body)
		return remoteFile{}, c.statusError(http.MethodGet, u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return remoteFile{}, c.transportError(ctx, http.MethodGet, u, err)
	}
	if len(body) > limit {
		return remoteFile{}, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("GET %s: %w: larger than %d bytes, the most this view reads; it is left as it is (move it away, or point url at a new folder)", u, errTooLarge, limit))
	}
	f := remoteFile{body: body, exists: true}
	if tag := resp.Header.Get("ETag"); strongETag.MatchString(tag) {
		f.etag = tag
	}
	return f, nil
}

// put writes body to rel, only if the file is still as f was read: If-Match
// its entity tag, or If-None-Match "*" when it did not exist. A file read
// without an entity tag is written unconditionally. It returns errChanged
// for 412 and errNoParent for 409 (or 404) as connect errors.
func (c *davClient) put(ctx context.Context, rel string, body []byte, f remoteFile) error {
	u := c.fileURL(rel)
	h := http.Header{"Content-Type": {"text/csv; charset=utf-8"}}
	switch {
	case !f.exists:
		h.Set("If-None-Match", "*")
	case f.etag != "":
		h.Set("If-Match", f.etag)
	}
	resp, err := c.send(ctx, http.MethodPut, u, body, h)
	if err != nil {
		return err
	}
	drain(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent:
		return nil
	case http.StatusPreconditionFailed:
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("PUT %s: %w", u, errChanged))
	case http.StatusConflict, http.StatusNotFound:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("PUT %s: %w (HTTP %d)", u, errNoParent, resp.StatusCode))
	}
	return c.statusError(http.MethodPut, u, resp.StatusCode)
}

// mkcol creates the collection rel (ending with "/"). One that exists
// already (405) is fine; errNoParent means its parent is missing.
func (c *davClient) mkcol(ctx context.Context, rel string) error {
	u := c.fileURL(rel)
	resp, err := c.send(ctx, "MKCOL", u, nil, nil)
	if err != nil {
		return err
	}
	drain(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent, http.StatusMethodNotAllowed:
		return nil
	case http.StatusConflict:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("MKCOL %s: %w", u, errNoParent))
	}
	return c.statusError("MKCOL", u, resp.StatusCode)
}

// send sends one request with the credentials. A transport failure is
// CodeUnavailable (or the context's code), with a scrubbed message.
func (c *davClient) send(ctx context.Context, method string, u *url.URL, body []byte, h http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("%s %s: cannot build the request", method, u))
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, method, u, err)
	}
	return resp, nil
}

// transportError maps a failed request: the caller's cancellation keeps its
// code, anything else is CodeUnavailable, so the core sends the page again
// later. The message quotes the HTTP stack's error, scrubbed and escaped.
func (c *davClient) transportError(ctx context.Context, method string, u *url.URL, err error) error {
	if ctx.Err() != nil {
		return contextError(ctx.Err())
	}
	var ue *url.Error
	msg := err.Error()
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	for _, s := range c.secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s %s: %s", method, u, display.Limit(msg, 512)))
}

// statusError maps an answer the view cannot use. Refused credentials and
// redirects need the owner (CodeFailedPrecondition); a busy or failing
// server is CodeUnavailable, which the core retries.
func (c *davClient) statusError(method string, u *url.URL, code int) error {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
			"%s %s: the WebDAV server refused the credentials for the folder %s (HTTP %d): check the username and password in the webdav-credentials Secret and the user's rights on the folder",
			method, u, c.folder, code))
	case code >= 300 && code < 400:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
			"%s %s: the server answered a redirect (HTTP %d), which this view does not follow: set url to the folder's own address", method, u, code))
	case code == http.StatusRequestTimeout, code == http.StatusLocked, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests, code >= 500:
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s %s: the server answered HTTP %d", method, u, code))
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s %s: the server answered HTTP %d", method, u, code))
}

// drain reads a little of an unused body, so the connection can be kept.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, maxAnswerBytes)) }

// contextError keeps the code of the caller's cancellation or deadline.
func contextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeCanceled, err)
}
