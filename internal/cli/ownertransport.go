package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/arkadiuss/openfief/internal/display"
)

// Where the owner's token may go. The token is the owner's credential for
// openfief-core's owner API (OF-18): whoever holds it reads every record
// and may import and purge data for ten minutes. So the CLI sends it only
// over https, or over plain http to a loopback address (127.0.0.0/8, ::1,
// or the name localhost), as `openfief dev`'s in-process core listens; any
// other http URL is refused before a connection is made. And the client
// that carries it follows no redirect: an answer 3xx is an error, its
// Location never visited, so neither the core's address nor anything
// between (the API server's service proxy passes a backend's redirect on)
// can send the token, or the kubeconfig's credentials, elsewhere.
const ownerURLRule = "the owner's token is sent only over https, or over http to a loopback address (127.0.0.0/8, ::1, localhost)"

// errNotLoopback is the refusal of an http URL to another host than a
// loopback one, at the URL or (for localhost) at the dial.
var errNotLoopback = errors.New(ownerURLRule)

// parseOwnerURL parses raw and checks it with checkOwnerURL; its errors
// never repeat raw.
func parseOwnerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL: want http(s)://host:port")
	}
	if err := checkOwnerURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// shownURL is raw as an error may repeat it: a password in it replaced by
// xxxxx, unsafe characters escaped.
func shownURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		raw = u.Redacted()
	}
	return display.Text(raw)
}

// checkOwnerURL says whether the owner's token may be sent to base, the
// owner API's root: https to any host, or http to a loopback host. It also
// refuses what the CLI could not append paths to (a query or fragment) and
// credentials in the URL, which would be sent beside the token.
func checkOwnerURL(base *url.URL) error {
	switch {
	case base.Scheme != "http" && base.Scheme != "https":
		return errors.New("want http(s)://host:port")
	case base.Host == "" || base.Hostname() == "":
		return errors.New("no host")
	case base.User != nil:
		return errors.New("holds credentials: the owner's token is the only credential the owner API takes")
	case base.RawQuery != "" || base.Fragment != "" || base.Opaque != "":
		return errors.New("want http(s)://host:port[/path], without a query or fragment")
	case base.Scheme == "http" && !isLoopbackHost(base.Hostname()):
		return errNotLoopback
	}
	return nil
}

// isLoopbackHost reports whether host (without its port) is the name
// localhost or an IP address in 127.0.0.0/8 or ::1.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dialLoopbackOnly is the Control of the dialer of an http owner client: it
// refuses a connection to any address but a loopback one, so a name such as
// localhost that resolves elsewhere still sends nothing. It runs before
// connect(2).
func dialLoopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("dial %s: %w", address, errNotLoopback)
	}
	return nil
}

// maxOwnerAnswerHeader bounds the header of an owner API answer.
const maxOwnerAnswerHeader = 64 << 10

// directOwnerClient returns the client for a --core-url already through
// checkOwnerURL: no redirect followed, and for http a dialer that connects
// to loopback addresses only and no proxy; https keeps the environment's
// proxy (the tunnel carries TLS end to end).
func directOwnerClient(base *url.URL, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxResponseHeaderBytes = maxOwnerAnswerHeader
	if base.Scheme == "http" {
		d := &net.Dialer{Timeout: timeout, Control: dialLoopbackOnly}
		t.DialContext = d.DialContext
		t.Proxy = nil
	}
	return &http.Client{Timeout: timeout, Transport: t, CheckRedirect: refuseOwnerRedirect}
}

// refuseOwnerRedirect is the CheckRedirect of every client that carries the
// owner's token: the 3xx answer is returned as it is, unfollowed, and
// coreAPI.do turns it into an error.
func refuseOwnerRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxLocationShown bounds how much of a refused redirect's Location an
// error repeats.
const maxLocationShown = 256

// errCoreRedirect is an owner API answer 3xx, which the CLI never follows.
type errCoreRedirect struct {
	code int
	// location is the answer's Location as it came: hostile text, shown
	// only through display.
	location string
}

func (e *errCoreRedirect) Error() string {
	to := "no Location"
	if e.location != "" {
		to = "Location " + display.Limit(e.location, maxLocationShown)
	}
	return fmt.Sprintf("the core's address answered %d, a redirect (%s), which the CLI never follows: it sends the owner's token only to the address it was given", e.code, to)
}
