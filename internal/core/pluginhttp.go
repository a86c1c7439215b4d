package core

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// ErrRedirectRefused is wrapped when a plugin answers a call with a
// redirect. The core never follows one: following it would replay the
// request (Connect resends a unary body, and the token with it) to any
// address the plugin names, the core's own owner API included.
var ErrRedirectRefused = errors.New("the plugin answered with a redirect, which the core never follows")

// ErrCompressedAnswer is returned when a plugin answers with a compressed
// body, which the core never asks for: how much memory a compressed answer
// decodes to is known only once it has been inflated.
var ErrCompressedAnswer = errors.New("the plugin answered a compressed body, which the core does not accept")

// errAnswerBytes is what a plugin's answer body reports once it has given
// more bytes than the core reads.
var errAnswerBytes = errors.New("the answer's body is longer than the core reads")

// answerSlack is what a capped body carries beyond the answer's message:
// the envelope prefixes and the end of a stream with its trailers.
const answerSlack = 64 << 10

// maxAnswerHeaderBytes bounds the header of a plugin's answer.
const maxAnswerHeaderBytes = 64 << 10

// redirectError is a refused redirect: its status only, never the
// Location the plugin wrote.
type redirectError struct{ status int }

func (e redirectError) Error() string {
	return fmt.Sprintf("%v (HTTP %d)", ErrRedirectRefused, e.status)
}

func (redirectError) Unwrap() error { return ErrRedirectRefused }

// refuseRedirect is the CheckRedirect of every client that calls plugins: a
// second line behind cappedTransport, which refuses every 3xx answer.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	e := redirectError{}
	if req.Response != nil {
		e.status = req.Response.StatusCode
	}
	return e
}

// pluginTransport is the transport behind a Caller with no HTTP client of
// its own: the default one without transparent decompression (the core
// declines compressed answers, whose decoded size is not known before they
// are inflated) and with a bounded answer header.
var pluginTransport = sync.OnceValue(func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.MaxResponseHeaderBytes = maxAnswerHeaderBytes
	return t
})

// pluginHTTPClient returns the client for one call to a plugin: base's
// transport (or pluginTransport) with every answer body cut at limit bytes,
// and no redirect followed, whatever base says.
func pluginHTTPClient(base *http.Client, limit int64) *http.Client {
	hc := &http.Client{}
	if base != nil {
		*hc = *base
	}
	rt := hc.Transport
	if rt == nil {
		rt = pluginTransport()
	}
	hc.Transport = cappedTransport{rt: rt, limit: limit}
	hc.CheckRedirect = refuseRedirect
	return hc
}

// cappedTransport refuses redirects and cuts every answer body at limit bytes: whatever reads it
// gets errAnswerBytes after that, so neither Connect's reading nor its
// draining of an oversized answer goes on for the plugin's whole body.
type cappedTransport struct {
	rt    http.RoundTripper
	limit int64
}

// RoundTrip sends req and caps the answer's body. Any 3xx answer is
// refused here, before a client could follow it (a redirect the client
// would not follow, of a streamed body it cannot replay, is named the
// same), and so is a compressed answer.
func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		_ = resp.Body.Close()
		return nil, redirectError{status: resp.StatusCode}
	}
	for _, h := range []string{"Content-Encoding", "Connect-Content-Encoding"} {
		if v := resp.Header.Get(h); v != "" && v != "identity" {
			_ = resp.Body.Close()
			return nil, ErrCompressedAnswer
		}
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.limit}
	return resp, nil
}

// cappedBody reads at most left bytes of rc and then fails.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

// Read reads from the body until its cap.
func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errAnswerBytes
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, errAnswerBytes
	}
	return n, err
}

// Close closes the body.
func (b *cappedBody) Close() error { return b.rc.Close() }
