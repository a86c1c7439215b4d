package core

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// Several replicas answer the owner API alike (leases.go): the status comes
// from the store, and an owner's import, which only the replica serving the
// plugin may make (one call at a time to each instance), is passed by the
// replica it reached to the one holding the plugin's lease, at the address
// that replica keeps with its leases. The holder checks the owner's token
// again; a request passed on once is never passed on again.

// headerForwarded marks an owner's import one replica passed to another.
const headerForwarded = "X-Openfief-Forwarded"

// errServedElsewhere is an import that reached a replica not serving the
// plugin, when it cannot be passed on.
var errServedElsewhere = errors.New("another replica of the core serves this plugin and could not be reached: try again shortly")

// forwardTransport carries an import from one replica to another: straight
// to the holder's address, never through a proxy the environment names (the
// request holds the owner's token), with a bounded dial; the owner's request
// bounds the rest.
var forwardTransport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	TLSHandshakeTimeout: 5 * time.Second,
	MaxIdleConnsPerHost: 2,
	IdleConnTimeout:     time.Minute,
}

// forwardImport passes an owner's import of name to the replica serving it,
// if that is another; true when it has answered w.
func (c *Core) forwardImport(w http.ResponseWriter, r *http.Request, name string) bool {
	if c.leases == nil || c.leases.Holds(name) {
		return false
	}
	if _, running := c.leases.Running(name); !running {
		return false // ImportFile says it is not a running connector
	}
	if r.Header.Get(headerForwarded) != "" {
		writeError(w, http.StatusServiceUnavailable, errServedElsewhere)
		return true
	}
	h, ok, err := c.leases.o.Store.Holder(r.Context(), name)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return true
	}
	if !ok || h.Owner == c.leases.Owner() {
		writeError(w, http.StatusServiceUnavailable, errServedElsewhere)
		return true
	}
	if _, _, err := net.SplitHostPort(h.Address); err != nil {
		writeError(w, http.StatusServiceUnavailable, errServedElsewhere)
		return true
	}
	r.Body = http.MaxBytesReader(w, r.Body, ownerapi.MaxImportBytes)
	proxy := &httputil.ReverseProxy{
		Transport: forwardTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: h.Address})
			pr.Out.Header.Set(headerForwarded, c.leases.Owner())
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w (%v)", errServedElsewhere, err))
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}
